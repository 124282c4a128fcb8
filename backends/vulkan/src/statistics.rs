//! What the driver says of each compiled pipeline, through
//! `VK_KHR_pipeline_executable_properties` where the device has it: the
//! statistics it reports per executable (NVIDIA: registers, shared memory,
//! spills; Mesa: instruction and register counts). `bench --profile --target
//! vulkan` prints them beside the timings, so a slow kernel's cause (spills,
//! a register count that halves occupancy) is visible without a profiler.

use ash::vk;

/// The driver's statistics of one pipeline: `(name, value)` as reported,
/// one list per executable the pipeline compiled into (compute: one).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelStatistics {
    pub pipeline: String,
    pub stats: Vec<(String, String)>,
}

/// Whether the device offers the extension and its feature: then the
/// device is created with both and pipelines capture their statistics.
pub(crate) fn supported(instance: &ash::Instance, physical: vk::PhysicalDevice) -> bool {
    let name = ash::khr::pipeline_executable_properties::NAME;
    // SAFETY: `physical` came from this instance.
    let Ok(exts) = (unsafe { instance.enumerate_device_extension_properties(physical) }) else {
        return false;
    };
    if !exts
        .iter()
        .any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
    {
        return false;
    }
    let mut feature = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut feature);
    // SAFETY: as above; the chain outlives the call.
    unsafe { instance.get_physical_device_features2(physical, &mut features) };
    feature.pipeline_executable_info == vk::TRUE
}

/// The statistics of `pipeline` (named `name`), or an empty list where the
/// driver reports none.
pub(crate) fn of(
    loader: &ash::khr::pipeline_executable_properties::Device,
    pipeline: vk::Pipeline,
    name: &str,
) -> KernelStatistics {
    let mut stats = Vec::new();
    let info = vk::PipelineInfoKHR::default().pipeline(pipeline);
    // SAFETY: `pipeline` is live and was created capturing statistics.
    let executables =
        unsafe { loader.get_pipeline_executable_properties(&info) }.unwrap_or_default();
    for index in 0..executables.len() as u32 {
        let info = vk::PipelineExecutableInfoKHR::default()
            .pipeline(pipeline)
            .executable_index(index);
        // SAFETY: as above, `index` below the count the driver gave.
        let list = unsafe { loader.get_pipeline_executable_statistics(&info) }.unwrap_or_default();
        for s in &list {
            let key = s
                .name_as_c_str()
                .map_or_else(|_| "?".to_string(), |n| n.to_string_lossy().into_owned());
            // SAFETY: `format` says which member of the union is set.
            let value = unsafe {
                match s.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                        (s.value.b32 != 0).to_string()
                    }
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => {
                        format!("{:.3}", s.value.f64)
                    }
                    _ => "?".to_string(),
                }
            };
            stats.push((key, value));
        }
    }
    KernelStatistics {
        pipeline: name.to_string(),
        stats,
    }
}
