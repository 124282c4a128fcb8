//! Per-thread scratch ([`crate::scratch`]) as a plan declares it and a run
//! takes it: a planned run on several threads takes no more than its plan
//! declared and gives the values of a run on one.

use rlx_ir::text::parse_graph;
use rlx_ir::Tensor;
use rlx_passes::{plan_memory_with, MemoryOptions};

use crate::exec::PlannedExecutable;
use crate::par::Pool;
use crate::plan::plan;
use crate::scratch::{overflows, SERVED};
use crate::tensor::TensorRef;
use std::sync::atomic::Ordering::Relaxed;

/// A depthwise convolution, a 3×3 maximum at stride 2 and an average pool:
/// each borders its planes on the thread that runs them.
const WINDOWS: &str = "rlx-ir 2
graph {
  %0 = input \"x\" : f32[1,32,57,57]
  %1 = input \"w\" : f32[32,1,3,3]
  %2 = conv(%0, %1) {strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], auto_pad=notset, group=32} : f32[1,32,57,57]
  %3 = max_pool(%2) {kernel_shape=[3, 3], strides=[2, 2], dilations=[1, 1], pads=[1, 1, 1, 1], auto_pad=notset, ceil_mode=false, count_include_pad=false, p=2, storage_order=0, with_indices=false} : f32[1,32,29,29]
  %4 = avg_pool(%3) {kernel_shape=[3, 3], strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], auto_pad=notset, ceil_mode=false, count_include_pad=false, p=2, storage_order=0, with_indices=false} : f32[1,32,29,29]
  output \"y\" = %4
}
";

/// `n` values over [-1, 1), varying with `seed`.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed) % 41) as f32 / 20.5 - 1.0)
        .collect()
}

#[test]
fn threads_take_what_the_plan_declares() {
    let g = parse_graph(WINDOWS).unwrap();
    let mem = plan_memory_with(&g, &MemoryOptions::default()).unwrap();
    let exec = PlannedExecutable::new(plan(&g, &Default::default(), &mem).unwrap());
    let need = exec.schedule.per_thread;
    if crate::kernels::conv::window::available() {
        assert!(need.each > 0, "{need:?}");
        assert!(exec.schedule.to_string().contains("bytes a thread"));
    }
    let x = Tensor::from_f32(&[1, 32, 57, 57], &values(32 * 57 * 57, 1)).unwrap();
    let w = Tensor::from_f32(&[32, 1, 3, 3], &values(32 * 9, 2)).unwrap();
    let inputs = [TensorRef::of(&x), TensorRef::of(&w)];
    let (before, served) = (overflows(), SERVED.load(Relaxed));
    let one = exec.run(&inputs).unwrap();
    let pool = Pool::new(3).unwrap();
    let three = pool.install(|| exec.run(&inputs)).unwrap();
    assert_eq!(overflows(), before, "a take past the declared scratch");
    if need.each > 0 {
        // Every plane of the three steps, twice.
        assert!(
            SERVED.load(Relaxed) >= served + 2 * 3 * 32,
            "takes not from the regions"
        );
    }
    assert_eq!(
        one[0].as_slice::<f32>().unwrap(),
        three[0].as_slice::<f32>().unwrap()
    );
}

/// An empty output plane takes nothing (its geometry has no bordered plane
/// to size), and sizes past the address space saturate, so that the arena
/// limit refuses them.
#[test]
fn empty_and_huge_declarations() {
    use crate::kernels::conv::window;
    use crate::scratch::PerThread;
    let g = window::Geom {
        input: [2, 5],
        output: [0, 4],
        kernel: [3, 3],
        strides: [1, 1],
        dilations: [1, 1],
        pads: [0, 0],
    };
    assert_eq!(window::scratch(&g), 0);
    #[cfg(target_arch = "x86_64")]
    assert_eq!(crate::kernels::conv::window_lanes::scratch(&g), 0);
    let huge = PerThread::each(crate::scratch::floats_bytes(usize::MAX / 2));
    assert!(huge.total(16) > 1 << 62);
    assert_eq!(PerThread::each(100).total(3), 3 * 128);
}
