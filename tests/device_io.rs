//! Device-resident run I/O (`Session::upload`, `Session::run_values`): the
//! same values as host runs, outputs fed back as inputs without the host,
//! partial readback, and typed errors for a tensor of another device. The
//! wgpu and Vulkan halves run on any Vulkan device (lavapipe in CI; Vulkan
//! with the validation layer on); the CUDA half on a CUDA device (the lent
//! GPU's `gpu-check.sh tests`), skipping elsewhere.

mod common;

use std::sync::Arc;

use rlx_onnx::ir::Tensor;
use rlx_onnx::{
    CompiledModel, Compiler, Devices, Error, InputError, Outputs, Session, SessionOptions, Target,
    Value,
};

/// y = x + x and z = -x over f32[2, 3, 4]: y has x's type, so it can be
/// fed back as the next run's x.
const DOUBLE: &str = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[2,3,4]\n  %1 = add(%0, %0) : f32[2,3,4]\n  %2 = neg(%0) : f32[2,3,4]\n  output \"y\" = %1\n  output \"z\" = %2\n}\n";

fn compile(target: Target) -> CompiledModel {
    compile_text(DOUBLE, target)
}

fn compile_text(text: &str, target: Target) -> CompiledModel {
    Compiler::new(target)
        .compile(common::imported(text), None)
        .unwrap()
}

fn x() -> Tensor {
    let v: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
    Tensor::from_f32(&[2, 3, 4], &v).unwrap()
}

fn scaled(t: &Tensor, k: f32) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().iter().map(|v| v * k).collect()
}

/// Host and device runs agree exactly; y fed back twice on the device is
/// 4x; a slice of a device output reads back alone; device tensors of the
/// session's device are refused by a CPU session and by a session on
/// another device context.
fn round_trip(session: &Session, other: &Session) {
    let x = x();
    let host = session.run(&[("x", &x)]).unwrap();
    let up = session.upload(&x).unwrap();
    assert!(up.is_on_device());
    let outs = session.run_values(&[("x", &up)], Outputs::Device).unwrap();
    assert!(outs.iter().all(Value::is_on_device));
    for (o, h) in outs.iter().zip(&host) {
        assert!(o.to_host().unwrap().bit_eq(h));
    }
    let again = session
        .run_values(&[("x", &outs[0])], Outputs::OnDevice(&["y"]))
        .unwrap();
    assert!(again[0].is_on_device() && !again[1].is_on_device());
    assert_eq!(
        again[0].to_host().unwrap().as_slice::<f32>().unwrap(),
        scaled(&x, 4.0)
    );
    assert_eq!(
        again[1].as_host().unwrap().as_slice::<f32>().unwrap(),
        scaled(&x, -2.0)
    );
    // One position along the middle axis: two spans of four floats.
    let part = again[0].slice_to_host(1, 2..3).unwrap();
    let four = Tensor::from_f32(&[2, 3, 4], &scaled(&x, 4.0)).unwrap();
    assert!(part.bit_eq(&four.slice_axis(1, 2..3).unwrap()));
    let e = session
        .run_values(&[("x", &up)], Outputs::OnDevice(&["w"]))
        .err()
        .unwrap();
    assert!(
        matches!(e, Error::Input(InputError::UnknownOutput { .. })),
        "{e}"
    );
    let e = other
        .run_values(&[("x", &up)], Outputs::Host)
        .err()
        .unwrap();
    assert!(e.to_string().contains("another"), "{e}");
    let cpu = Session::new(compile(Target::Cpu), SessionOptions::default()).unwrap();
    let e = cpu.run_values(&[("x", &up)], Outputs::Host).err().unwrap();
    assert!(
        matches!(&e, Error::Input(InputError::Device { name, .. }) if name == "x"),
        "{e}"
    );
}

#[test]
fn the_cpu_device_is_the_host() {
    let s = Session::new(compile(Target::Cpu), SessionOptions::default()).unwrap();
    let x = x();
    let v = s.upload(&x).unwrap();
    assert!(!v.is_on_device());
    let outs = s.run_values(&[("x", &v)], Outputs::Device).unwrap();
    assert!(outs.iter().all(|o| !o.is_on_device()));
    assert_eq!(
        outs[0].as_host().unwrap().as_slice::<f32>().unwrap(),
        scaled(&x, 2.0)
    );
    let part = outs[1].slice_to_host(0, 1..2).unwrap();
    assert_eq!(part.dims(), [1, 3, 4]);
    assert_eq!(part.as_slice::<f32>().unwrap(), &scaled(&x, -1.0)[12..]);
}

#[test]
fn wgpu_device_tensors_round_trip() {
    let Some(devices) = common::wgpu_devices() else {
        return;
    };
    let session =
        Session::with_devices(compile(Target::Wgpu), SessionOptions::default(), devices).unwrap();
    let other = Session::with_devices(
        compile(Target::Wgpu),
        SessionOptions::default(),
        Arc::new(Devices::new()),
    )
    .unwrap();
    round_trip(&session, &other);
}

#[test]
fn vulkan_device_tensors_round_trip() {
    let Some(devices) = common::vulkan_devices(true) else {
        return;
    };
    let session =
        Session::with_devices(compile(Target::Vulkan), SessionOptions::default(), devices).unwrap();
    let other = Session::with_devices(
        compile(Target::Vulkan),
        SessionOptions::default(),
        Arc::new(Devices::new()),
    )
    .unwrap();
    round_trip(&session, &other);
}

#[test]
fn cuda_device_tensors_round_trip() {
    let devices = Arc::new(Devices::new());
    if let Err(e) = devices.cuda() {
        eprintln!("skipping: {e}");
        return;
    }
    let session =
        Session::with_devices(compile(Target::Cuda), SessionOptions::default(), devices).unwrap();
    let other = Session::with_devices(
        compile(Target::Cuda),
        SessionOptions::default(),
        Arc::new(Devices::new()),
    )
    .unwrap();
    round_trip(&session, &other);
}

/// y = x + x and z = -x over f32[512, 1024]: 2 MiB outputs, which the CUDA
/// and Vulkan devices write into host buffers (pinned; mapped staging) lent
/// to the output tensors, and wgpu copies into buffers of its pool.
const LARGE: &str = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[512,1024]\n  %1 = add(%0, %0) : f32[512,1024]\n  %2 = neg(%0) : f32[512,1024]\n  output \"y\" = %1\n  output \"z\" = %2\n}\n";

/// Large host outputs are the CPU's, run after run, while earlier runs'
/// outputs are still held (the lent buffers run out after two runs and the
/// rest come down into ordinary memory: none is written while lent), and
/// again once they are dropped (the buffers back in the pool).
fn large_host_outputs_stay_while_held(target: Target, devices: Arc<Devices>) {
    let gpu = Session::with_devices(
        compile_text(LARGE, target),
        SessionOptions::default(),
        devices,
    )
    .unwrap();
    let cpu = Session::new(compile_text(LARGE, Target::Cpu), SessionOptions::default()).unwrap();
    let input = |k: usize| {
        let v: Vec<f32> = (0..512 * 1024)
            .map(|i| ((i * 7 + k * 13) % 1001) as f32 * 0.25 - k as f32)
            .collect();
        Tensor::from_f32(&[512, 1024], &v).unwrap()
    };
    for round in 0..2 {
        let xs: Vec<Tensor> = (0..5).map(|k| input(k + 5 * round)).collect();
        let held: Vec<Vec<Tensor>> = xs.iter().map(|x| gpu.run(&[("x", x)]).unwrap()).collect();
        for (x, outs) in xs.iter().zip(&held) {
            let want = cpu.run(&[("x", x)]).unwrap();
            assert_eq!(outs.len(), want.len());
            for (o, w) in outs.iter().zip(&want) {
                assert!(
                    o.bit_eq(w),
                    "{target:?} round {round}: a held output changed or differs from the CPU's"
                );
            }
        }
    }
}

#[test]
fn cuda_large_host_outputs_stay_while_held() {
    let devices = Arc::new(Devices::new());
    if let Err(e) = devices.cuda() {
        eprintln!("skipping: {e}");
        return;
    }
    large_host_outputs_stay_while_held(Target::Cuda, devices);
}

#[test]
fn wgpu_large_host_outputs_stay_while_held() {
    let Some(devices) = common::wgpu_devices() else {
        return;
    };
    large_host_outputs_stay_while_held(Target::Wgpu, devices);
}

#[test]
fn vulkan_large_host_outputs_stay_while_held() {
    let Some(devices) = common::vulkan_devices(true) else {
        return;
    };
    large_host_outputs_stay_while_held(Target::Vulkan, devices);
}

/// The golden decoder's greedy tokens (ONNX Runtime's, golden/make_golden.py)
/// come from `generate` on `session`, its cache on the device between steps,
/// growing and (where the target runs the in-place write) in place.
fn generates_the_reference(session: &Session, in_place_runs: bool) {
    use rlx_onnx::generate::{generate, CacheMode, GenerateOptions, Sampling};
    let (prompts, want) = common::decoder_reference();
    let options = GenerateOptions {
        max_new_tokens: want[0].len(),
        sampling: Sampling::Greedy,
        eos: None,
        in_place: false,
    };
    let out = generate(session, &prompts, &options).unwrap();
    assert_eq!(out.tokens, want);
    let options = GenerateOptions {
        in_place: true,
        ..options
    };
    let out = generate(session, &prompts, &options).unwrap();
    assert_eq!(out.tokens, want);
    match out.mode {
        CacheMode::InPlace { capacity } => {
            assert!(in_place_runs);
            assert_eq!(capacity, prompts[0].len() + want[0].len());
        }
        CacheMode::Growing { why } => {
            assert!(!in_place_runs, "{why:?}");
            assert!(why.is_some_and(|w| w.contains("tensor_scatter")));
        }
    }
}

fn decoder(target: Target) -> CompiledModel {
    Compiler::new(target)
        .compile_file(&common::root().join("golden/decoder/model.onnx"))
        .unwrap()
}

#[test]
fn wgpu_generates_the_reference_tokens() {
    let Some(devices) = common::wgpu_devices() else {
        return;
    };
    let session =
        Session::with_devices(decoder(Target::Wgpu), SessionOptions::default(), devices).unwrap();
    generates_the_reference(&session, true);
}

#[test]
fn vulkan_generates_the_reference_tokens() {
    let Some(devices) = common::vulkan_devices(true) else {
        return;
    };
    let session =
        Session::with_devices(decoder(Target::Vulkan), SessionOptions::default(), devices).unwrap();
    generates_the_reference(&session, true);
}

#[test]
fn cuda_generates_the_reference_tokens() {
    let devices = Arc::new(Devices::new());
    if let Err(e) = devices.cuda() {
        eprintln!("skipping: {e}");
        return;
    }
    let session =
        Session::with_devices(decoder(Target::Cuda), SessionOptions::default(), devices).unwrap();
    generates_the_reference(&session, true);
}

/// Decode steps of the golden decoder's in-place form run with the cache
/// kept in the caller's state (`Session::run_kept`) give the outputs of the
/// same steps run on the cache as values, bit for bit: steps one after the
/// other (the cache stays where the last step wrote it), and a step after
/// another state's run of the same executable in between (on CUDA, whose
/// memory the states share, that run copies the first state's cache out and
/// its next step copies it back). A kept input that no run of the state
/// left is refused before anything runs.
fn kept_runs_match_runs_on_values(session: &Session) {
    let (b, cap) = (2usize, 17usize);
    let names = session.model().input_names();
    let caches: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with("past_key_values"))
        .cloned()
        .collect();
    let outs = session.model().output_names();
    let presents: Vec<String> = outs
        .iter()
        .filter(|n| n.starts_with("present"))
        .cloned()
        .collect();
    // Step `pos` of token `tok`, the cache positions after `pos` hidden.
    let feed = |pos: usize, tok: i64, cache: &[Tensor]| -> Vec<(String, Tensor)> {
        let mask: Vec<i64> = (0..b * cap).map(|i| i64::from(i % cap <= pos)).collect();
        let ints = |dims: &[usize], v: &[i64]| Tensor::from_i64(dims, v).unwrap();
        let mut f = vec![
            ("input_ids".to_string(), ints(&[b, 1], &[tok, tok + 1])),
            ("attention_mask".to_string(), ints(&[b, cap], &mask)),
            ("position_ids".to_string(), ints(&[b, 1], &[pos as i64; 2])),
            ("cache_position".to_string(), ints(&[b], &[pos as i64; 2])),
        ];
        for (n, t) in caches.iter().zip(cache) {
            f.push((n.clone(), t.clone()));
        }
        f
    };
    let start = |seed: usize| -> Vec<Tensor> {
        (0..caches.len())
            .map(|c| {
                let v: Vec<f32> = (0..b * 2 * cap * 8)
                    .map(|i| {
                        if i % cap < 5 {
                            ((i * 7 + c + seed) % 13) as f32 / 13.0 - 0.5
                        } else {
                            0.0
                        }
                    })
                    .collect();
                Tensor::from_f32(&[b, 2, cap, 8], &v).unwrap()
            })
            .collect()
    };
    let plain = |f: &[(String, Tensor)]| {
        let named: Vec<(&str, &Tensor)> = f.iter().map(|(n, t)| (n.as_str(), t)).collect();
        session.run(&named).unwrap()
    };
    let presents_of = |outs_: &[Tensor]| -> Vec<Tensor> {
        presents
            .iter()
            .map(|p| outs_[outs.iter().position(|o| o == p).unwrap()].clone())
            .collect()
    };
    // Three steps of state `a` and one of `b`, each on the cache the last
    // left, run on values first (the references).
    let a1 = feed(5, 3, &start(0));
    let want_a1 = plain(&a1);
    let a2 = feed(6, 5, &presents_of(&want_a1));
    let want_a2 = plain(&a2);
    let a3 = feed(7, 8, &presents_of(&want_a2));
    let want_a3 = plain(&a3);
    let b1 = feed(5, 4, &start(3));
    let want_b1 = plain(&b1);
    // Cache inputs on the device (the host itself on the CPU).
    let values = |f: &[(String, Tensor)]| -> Vec<(String, Value)> {
        f.iter()
            .map(|(n, t)| {
                let v = if caches.contains(n) {
                    session.upload(t).unwrap()
                } else {
                    Value::Host(t.clone())
                };
                (n.clone(), v)
            })
            .collect()
    };
    let given = |f: &[(String, Value)]| -> Vec<(String, Option<Value>)> {
        f.iter()
            .map(|(n, v)| (n.clone(), Some(v.clone())))
            .collect()
    };
    let kept = |f: &[(String, Tensor)]| -> Vec<(String, Option<Value>)> {
        f.iter()
            .map(|(n, t)| {
                (
                    n.clone(),
                    (!caches.contains(n)).then(|| Value::Host(t.clone())),
                )
            })
            .collect()
    };
    let keep: Vec<&str> = presents.iter().map(String::as_str).collect();
    let run = |state: &mut rlx_onnx::RunState, f: &[(String, Option<Value>)], keep: &[&str]| {
        let named: Vec<(&str, Option<&Value>)> =
            f.iter().map(|(n, v)| (n.as_str(), v.as_ref())).collect();
        session.run_kept(state, &named, keep, Outputs::Host)
    };
    let check = |got: Vec<Option<Value>>, want: &[Tensor], what: &str| {
        for ((g, w), name) in got.iter().zip(want).zip(&outs) {
            match g {
                Some(g) => assert!(g.to_host().unwrap().bit_eq(w), "{what}: {name}"),
                None => assert!(presents.contains(name), "{what}: {name} was kept"),
            }
        }
    };
    let mut a = rlx_onnx::RunState::new();
    // Nothing ran in the state: a kept cache is refused.
    assert!(run(&mut a, &kept(&a1), &[]).is_err());
    let got = run(&mut a, &given(&values(&a1)), &[]).unwrap();
    check(got, &want_a1, "a, step 1");
    for c in &caches {
        assert!(session.holds_kept(&a, c), "{c}");
    }
    let got = run(&mut a, &kept(&a2), &keep).unwrap();
    check(got, &want_a2, "a, step 2 on the kept cache");
    // Another state's run of the same executable in between.
    let mut other = rlx_onnx::RunState::new();
    assert!(run(&mut other, &kept(&b1), &keep).is_err());
    let got = run(&mut other, &given(&values(&b1)), &keep).unwrap();
    check(got, &want_b1, "b, step 1");
    for c in &caches {
        assert!(session.holds_kept(&a, c), "{c} after another state's run");
    }
    let got = run(&mut a, &kept(&a3), &keep).unwrap();
    check(got, &want_a3, "a, step 3 after b's step");
}

fn in_place_decoder(target: Target) -> CompiledModel {
    rlx_onnx::generate::in_place_model(&decoder(target)).unwrap()
}

#[test]
fn cpu_kept_runs_match_runs_on_values() {
    let session =
        Session::new(in_place_decoder(Target::Cpu), SessionOptions { threads: 1 }).unwrap();
    kept_runs_match_runs_on_values(&session);
}

#[test]
fn cuda_kept_runs_match_runs_on_values() {
    let devices = Arc::new(Devices::new());
    if let Err(e) = devices.cuda() {
        eprintln!("skipping: {e}");
        return;
    }
    let session = Session::with_devices(
        in_place_decoder(Target::Cuda),
        SessionOptions::default(),
        devices,
    )
    .unwrap();
    kept_runs_match_runs_on_values(&session);
}

/// Targets that hold no values between runs refuse a kept run (the caller
/// runs as usual instead), before anything runs.
#[test]
fn wgpu_refuses_kept_runs() {
    let Some(devices) = common::wgpu_devices() else {
        return;
    };
    let session =
        Session::with_devices(compile(Target::Wgpu), SessionOptions::default(), devices).unwrap();
    let x = Value::Host(x());
    let mut state = rlx_onnx::RunState::new();
    let err = session
        .run_kept(&mut state, &[("x", Some(&x))], &[], Outputs::Host)
        .unwrap_err();
    assert!(err.to_string().contains("holds no values"), "{err}");
}
