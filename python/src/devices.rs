//! The device contexts of the process: one per (target, device id), shared
//! by every session and `OrtValue` on it, as ONNX Runtime shares a device
//! among sessions. A device value is the input of any session on its device.

use std::sync::{Arc, Mutex};

use rlx_onnx::{Devices, Target};

/// The contexts of `target`'s device `id` (opened on first use).
pub fn of(target: Target, id: usize) -> Arc<Devices> {
    static ALL: Mutex<Vec<((Target, usize), Arc<Devices>)>> = Mutex::new(Vec::new());
    let mut all = ALL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, d)) = all.iter().find(|(k, _)| *k == (target, id)) {
        return d.clone();
    }
    let d = Arc::new(match target {
        Target::Cuda => Devices::with_cuda_options(rlx_onnx::cuda::ContextOptions {
            ordinal: id,
            ..Default::default()
        }),
        Target::Vulkan => Devices::with_vulkan_options(rlx_onnx::vulkan::ContextOptions {
            device: rlx_onnx::vulkan::DeviceChoice::Index(id),
            ..Default::default()
        }),
        Target::Cpu | Target::Wgpu => Devices::new(),
    });
    all.push(((target, id), d.clone()));
    d
}
