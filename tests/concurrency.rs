//! One compiled model run from 8 threads gives outputs bit-identical to a
//! single-threaded run: on the CPU (1,000 runs a thread) and on wgpu
//! (lavapipe in CI; 125 runs a thread, 1,000 in all: a wgpu executable
//! serializes its runs, so what is checked is that serialization, and
//! lavapipe's ~8 ms a run made 8,000 of them two minutes of CI). Sessions
//! and compiled models are `Send + Sync`.

mod common;

use std::sync::Arc;

use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{data_set_dirs, read_data_set};
use rlx_onnx::{CompiledModel, Compiler, Devices, Session, SessionOptions, Target};

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Session>();
    send_sync::<CompiledModel>();
    send_sync::<Devices>();
};

fn hammer(target: Target, devices: Arc<Devices>, runs: usize) {
    for case in ["cnn", "transformer"] {
        let dir = common::root().join("golden").join(case);
        let model = Compiler::new(target)
            .compile_file(&dir.join("model.onnx"))
            .unwrap();
        let names = model.input_names();
        let data = read_data_set(&data_set_dirs(&dir).unwrap()[0]).unwrap();
        let session = Arc::new(
            Session::with_devices(model, SessionOptions { threads: 2 }, devices.clone()).unwrap(),
        );
        let named: Vec<(&str, &Tensor)> =
            names.iter().map(String::as_str).zip(&data.inputs).collect();
        let reference = session.run(&named).unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                let (session, named, reference) = (&session, &named, &reference);
                s.spawn(move || {
                    for i in 0..runs {
                        let out = session.run(named).unwrap();
                        for (a, b) in out.iter().zip(reference) {
                            assert!(a.bit_eq(b), "{target} {case}: thread {t}, run {i} differs");
                        }
                    }
                });
            }
        });
    }
}

#[test]
fn eight_threads_on_the_cpu_agree_bit_for_bit() {
    hammer(Target::Cpu, Arc::new(Devices::new()), 1000);
}

#[test]
fn eight_threads_on_wgpu_agree_bit_for_bit() {
    let Some(devices) = common::wgpu_devices() else {
        return;
    };
    hammer(Target::Wgpu, devices, 125);
}
