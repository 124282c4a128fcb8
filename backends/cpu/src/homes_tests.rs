//! Runs whose buffers live in the caller's memory ([`crate::homes`]) give
//! the values of runs that copy through the arena, and the plan homes only
//! the buffers it may.

use rlx_ir::text::parse_graph;
use rlx_ir::Tensor;
use rlx_passes::{plan_memory_with, MemoryOptions};

use crate::exec::{PlannedExecutable, RunState};
use crate::homes::{Bound, Home};
use crate::plan::plan;
use crate::tensor::TensorRef;

/// `text` planned as a session plans it for the CPU (concatenations and
/// splits in place, cache updates over their cache).
fn executable(text: &str) -> PlannedExecutable {
    let g = parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mem = plan_memory_with(
        &g,
        &MemoryOptions {
            concat_in_place: true,
            split_in_place: true,
            scatter_in_place: true,
        },
    )
    .unwrap();
    PlannedExecutable::new(plan(&g, &Default::default(), &mem).unwrap())
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
        .collect()
}

fn floats(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

/// The run through the arena alone (a state's run keeps nothing in the
/// caller's memory).
fn arena_run(exec: &PlannedExecutable, inputs: &[TensorRef]) -> Vec<Tensor> {
    let ins: Vec<Option<TensorRef>> = inputs.iter().map(|t| Some(*t)).collect();
    let keep = vec![false; exec.schedule.outputs.len()];
    exec.run_kept(&mut RunState::new(), &ins, &keep)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect()
}

fn as_ref(t: &Tensor) -> TensorRef<'_> {
    TensorRef {
        dtype: t.dtype(),
        dims: t.dims(),
        bytes: t.bytes(),
    }
}

const VIEWS_AND_PIECES: &str = "rlx-ir 2
graph {
  %0 = input \"x\" : f32[1,64,32,32]
  %1 = constant i64[2] [64, 1024] : i64[2]
  %2 = reshape(%0, %1) {allowzero=false} : f32[64,1024]
  %3 = relu(%2) : f32[64,1024]
  %4 = relu(%0) : f32[1,64,32,32]
  %5 = neg(%0) : f32[1,64,32,32]
  %6 = concat(%4, %5) {axis=1} : f32[1,128,32,32]
  %7:2 = split(%0) {axis=1, num_outputs=2} : (f32[1,32,32,32], f32[1,32,32,32])
  %8 = add(%7.0, %7.1) : f32[1,32,32,32]
  output \"r\" = %3
  output \"c\" = %6
  output \"s\" = %8
  output \"x\" = %0
}
";

#[test]
fn inputs_are_read_and_outputs_written_in_place() {
    let exec = executable(VIEWS_AND_PIECES);
    let s = &exec.schedule;
    assert_eq!(s.inputs_in_place, [true]);
    let homes: Vec<Option<Bound>> = s.outputs.iter().map(|o| o.bound).collect();
    let own = |i| {
        Some(Bound {
            home: Home::Output(i),
            offset: 0,
        })
    };
    // The last output is the input itself: its buffer is the input's.
    let input = Some(Bound {
        home: Home::Input(0),
        offset: 0,
    });
    assert_eq!(homes, [own(0), own(1), own(2), input]);

    let x = Tensor::from_values(&[1, 64, 32, 32], &values(65536, 7)).unwrap();
    let got = exec.run(&[as_ref(&x)]).unwrap();
    let want = arena_run(&exec, &[as_ref(&x)]);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.dims(), w.dims());
        assert_eq!(floats(g), floats(w));
    }
    // Against the definition, not only the other path.
    let xv = floats(&x);
    assert_eq!(
        floats(&got[0]),
        xv.iter().map(|v| v.max(0.0)).collect::<Vec<_>>()
    );
    let c = floats(&got[1]);
    assert_eq!(
        &c[..65536],
        xv.iter().map(|v| v.max(0.0)).collect::<Vec<_>>()
    );
    assert_eq!(&c[65536..], xv.iter().map(|v| -v).collect::<Vec<_>>());
    let sum: Vec<f32> = (0..32768).map(|i| xv[i] + xv[i + 32768]).collect();
    assert_eq!(floats(&got[2]), sum);
    assert_eq!(floats(&got[3]), xv);
}

#[test]
fn outputs_held_across_runs_keep_their_values() {
    let exec = executable(VIEWS_AND_PIECES);
    let a = Tensor::from_values(&[1, 64, 32, 32], &values(65536, 1)).unwrap();
    let b = Tensor::from_values(&[1, 64, 32, 32], &values(65536, 2)).unwrap();
    let first = exec.run(&[as_ref(&a)]).unwrap();
    let kept: Vec<Vec<f32>> = first.iter().map(floats).collect();
    for _ in 0..3 {
        let second = exec.run(&[as_ref(&b)]).unwrap();
        assert_ne!(floats(&second[0]), kept[0]);
    }
    for (t, k) in first.iter().zip(&kept) {
        assert_eq!(&floats(t), k);
    }
}

#[test]
fn unaligned_inputs_are_copied() {
    let exec = executable(VIEWS_AND_PIECES);
    let x = Tensor::from_values(&[1, 64, 32, 32], &values(65536, 3)).unwrap();
    // The same bytes at an address 4 past an 8-byte boundary.
    let mut words = vec![0u32; 65536 + 2];
    let skew = usize::from((words.as_ptr() as usize).is_multiple_of(8));
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words[skew..skew + 65536]);
    bytes.copy_from_slice(x.bytes());
    assert!(!(bytes.as_ptr() as usize).is_multiple_of(8));
    let skewed = TensorRef {
        dtype: x.dtype(),
        dims: x.dims(),
        bytes,
    };
    let got = exec.run(&[skewed]).unwrap();
    let want = exec.run(&[as_ref(&x)]).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(floats(g), floats(w));
    }
}

#[test]
fn a_cache_updated_over_its_input_stays_in_the_arena() {
    let exec = executable(
        "rlx-ir 2
graph {
  %0 = input \"past\" : f32[1,4,64,64]
  %1 = input \"new\" : f32[1,4,1,64]
  %2 = tensor_scatter(%0, %1) {axis=2, circular=false, has_indices=false} : f32[1,4,64,64]
  output \"present\" = %2
}
",
    );
    let s = &exec.schedule;
    assert_eq!(s.inputs_in_place, [false, true]);
    assert_eq!(s.outputs[0].bound, None);
    let past = Tensor::from_values(&[1, 4, 64, 64], &values(16384, 4)).unwrap();
    let new = Tensor::from_values(&[1, 4, 1, 64], &values(256, 5)).unwrap();
    let got = floats(&exec.run(&[as_ref(&past), as_ref(&new)]).unwrap()[0]);
    let mut want = floats(&past);
    let nv = floats(&new);
    for h in 0..4 {
        want[h * 4096..h * 4096 + 64].copy_from_slice(&nv[h * 64..h * 64 + 64]);
    }
    assert_eq!(got, want);
    // The caller's cache is not written.
    assert_eq!(floats(&past), values(16384, 4));
}
