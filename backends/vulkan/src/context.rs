//! The explicit device context: the Vulkan loader (opened at run time), an
//! instance, the chosen physical device, its one compute queue, and what
//! executables share (a pipeline cache, SPIR-V by source, a command pool for
//! one-off transfers). No process-wide state: create one, share it.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::{vk_err, Caps, VulkanError};

/// Which physical device a [`Context`] runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// A discrete GPU, else an integrated one, else a virtual one, else a
    /// CPU implementation (Mesa's lavapipe).
    #[default]
    Fastest,
    /// The `n`th device in the loader's enumeration order.
    Index(usize),
    /// The first device whose name contains this text.
    Named(String),
}

/// Whether the Khronos validation layer checks every Vulkan call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Validation {
    #[default]
    Off,
    /// On when the layer is installed.
    IfPresent,
    /// On, and `Unavailable` when the layer is not installed.
    Required,
}

/// How a [`Context`] is made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextOptions {
    pub device: DeviceChoice,
    pub validation: Validation,
}

/// What the chosen device says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub kind: &'static str,
    pub software: bool,
    pub driver: String,
    /// The device's Vulkan version (major, minor, patch).
    pub api: (u32, u32, u32),
}

/// Messages of the validation layer, collected by its callback.
pub(crate) struct Messages(Mutex<Vec<String>>);

struct Debug {
    loader: ash::ext::debug_utils::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
    /// Owned here; the callback holds a pointer to it until the messenger
    /// is destroyed.
    messages: Box<Messages>,
}

/// A one-off command buffer for uploads and reads outside runs.
struct OneShot {
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
}

/// An instance, a device and its compute queue: create once, share between
/// executables.
pub struct Context {
    // Dropped in reverse: see `Drop`.
    _entry: ash::Entry,
    instance: ash::Instance,
    debug: Option<Debug>,
    pub(crate) device: ash::Device,
    pub(crate) family: u32,
    queue: Mutex<vk::Queue>,
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
    pub(crate) limits: vk::PhysicalDeviceLimits,
    /// Nanoseconds per timestamp tick, when the queue writes timestamps.
    pub(crate) timestamp_period: Option<f64>,
    pub(crate) pipeline_cache: vk::PipelineCache,
    pub(crate) spirv: Mutex<HashMap<String, Arc<Vec<u32>>>>,
    /// `VK_KHR_pipeline_executable_properties`, where the device has it:
    /// pipelines then capture the driver's statistics.
    pub(crate) statistics: Option<ash::khr::pipeline_executable_properties::Device>,
    one_shot: Mutex<OneShot>,
    pub info: DeviceInfo,
}

// SAFETY: every handle is a plain Vulkan handle; the queue and the one-shot
// command buffer, which Vulkan requires to be externally synchronized, are
// behind mutexes, and the validation messages behind their own.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

impl Context {
    /// The fastest device, without validation, or `Unavailable`.
    pub fn new() -> Result<Context, VulkanError> {
        Context::with_options(&ContextOptions::default())
    }

    pub fn with_options(opts: &ContextOptions) -> Result<Context, VulkanError> {
        let unavailable = |what: &str| {
            let what = what.to_string();
            move |e: vk::Result| VulkanError::Unavailable(format!("{what}: {e}"))
        };
        // SAFETY: loading the system's Vulkan loader runs its initializers;
        // that is what every Vulkan program does.
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| VulkanError::Unavailable(format!("no Vulkan loader: {e}")))?;
        let layers = unsafe { entry.enumerate_instance_layer_properties() }
            .map_err(unavailable("listing instance layers"))?;
        let has_layer = layers
            .iter()
            .any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER));
        let validate = match opts.validation {
            Validation::Off => false,
            Validation::IfPresent => has_layer,
            Validation::Required if has_layer => true,
            Validation::Required => return Err(VulkanError::Unavailable(
                "the Khronos validation layer is not installed (Debian: vulkan-validationlayers)"
                    .into(),
            )),
        };
        let app = vk::ApplicationInfo::default()
            .application_name(c"rlx-onnx")
            .engine_name(c"rlx-vulkan")
            .api_version(vk::API_VERSION_1_1);
        let layer_names = [VALIDATION_LAYER.as_ptr()];
        let extension_names = [ash::ext::debug_utils::NAME.as_ptr()];
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if validate {
            info = info
                .enabled_layer_names(&layer_names)
                .enabled_extension_names(&extension_names);
        }
        // SAFETY: `info` and what it points to outlive the call.
        let instance = unsafe { entry.create_instance(&info, None) }
            .map_err(unavailable("creating an instance"))?;
        let debug = if validate {
            match messenger(&entry, &instance) {
                Ok(d) => Some(d),
                Err(e) => {
                    unsafe { instance.destroy_instance(None) };
                    return Err(e);
                }
            }
        } else {
            None
        };
        // From here on, a failure destroys what was made (see `Partial`).
        let partial = Partial {
            instance: Some(instance),
            debug,
        };
        partial.finish(entry, opts)
    }

    /// The device in one line: name, kind, driver and Vulkan version.
    pub fn describe(&self) -> String {
        let i = &self.info;
        format!(
            "{}: {} through Vulkan {}.{}.{}, driver {}",
            i.name, i.kind, i.api.0, i.api.1, i.api.2, i.driver
        )
    }

    /// Whether the device is a CPU implementation (lavapipe, SwiftShader).
    pub fn is_software(&self) -> bool {
        self.info.software
    }

    /// What plans for this device may assume.
    pub fn caps(&self) -> Caps {
        Caps {
            max_binding: u64::from(self.limits.max_storage_buffer_range).min(1 << 30),
        }
    }

    /// Whether the validation layer checks this context's calls.
    pub fn validates(&self) -> bool {
        self.debug.is_some()
    }

    /// The validation layer's errors and warnings since the last call.
    pub fn take_validation_messages(&self) -> Vec<String> {
        match &self.debug {
            Some(d) => std::mem::take(&mut *d.messages.0.lock().unwrap_or_else(|p| p.into_inner())),
            None => Vec::new(),
        }
    }

    /// `Err(Validation)` when the layer reported anything since the last
    /// check.
    pub(crate) fn check_validation(&self) -> Result<(), VulkanError> {
        let m = self.take_validation_messages();
        if m.is_empty() {
            Ok(())
        } else {
            Err(VulkanError::Validation(m.join("\n")))
        }
    }

    /// Submits `cmds` in order on the queue and waits for them.
    pub(crate) fn submit_wait(
        &self,
        cmds: &[vk::CommandBuffer],
        fence: vk::Fence,
    ) -> Result<(), VulkanError> {
        let submit = [vk::SubmitInfo::default().command_buffers(cmds)];
        {
            let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: the queue is externally synchronized by the mutex; the
            // command buffers are recorded and not pending elsewhere.
            unsafe { self.device.queue_submit(*queue, &submit, fence) }
                .map_err(vk_err("submitting work"))?;
        }
        unsafe {
            self.device
                .wait_for_fences(&[fence], true, u64::MAX)
                .map_err(vk_err("waiting for the device"))?;
            self.device
                .reset_fences(&[fence])
                .map_err(vk_err("resetting a fence"))?;
        }
        self.check_validation()
    }

    /// Records `record` into a one-off command buffer, submits it and waits.
    pub(crate) fn one_shot(
        &self,
        record: impl FnOnce(vk::CommandBuffer),
    ) -> Result<(), VulkanError> {
        let shot = self.one_shot.lock().unwrap_or_else(|p| p.into_inner());
        let d = &self.device;
        unsafe {
            d.reset_command_pool(shot.pool, vk::CommandPoolResetFlags::empty())
                .map_err(vk_err("resetting a command pool"))?;
            d.begin_command_buffer(
                shot.cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(vk_err("recording commands"))?;
        }
        record(shot.cmd);
        unsafe { d.end_command_buffer(shot.cmd) }.map_err(vk_err("recording commands"))?;
        self.submit_wait(&[shot.cmd], shot.fence)
    }

    /// The index of a memory type allowed by `bits` with all of `need`,
    /// preferring one with `want` too.
    pub(crate) fn memory_type(
        &self,
        bits: u32,
        need: vk::MemoryPropertyFlags,
        want: vk::MemoryPropertyFlags,
    ) -> Option<u32> {
        let types = &self.memory.memory_types[..self.memory.memory_type_count as usize];
        let fits = |i: usize, flags: vk::MemoryPropertyFlags| {
            bits & (1 << i) != 0 && types[i].property_flags.contains(flags)
        };
        (0..types.len())
            .find(|&i| fits(i, need | want))
            .or_else(|| (0..types.len()).find(|&i| fits(i, need)))
            .map(|i| i as u32)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: executables and buffers hold an `Arc<Context>`, so none is
        // alive; the device is idle after the wait.
        unsafe {
            let _ = self.device.device_wait_idle();
            let shot = self.one_shot.get_mut().unwrap_or_else(|p| p.into_inner());
            self.device.destroy_fence(shot.fence, None);
            self.device.destroy_command_pool(shot.pool, None);
            self.device
                .destroy_pipeline_cache(self.pipeline_cache, None);
            self.device.destroy_device(None);
            if let Some(d) = self.debug.take() {
                d.loader.destroy_debug_utils_messenger(d.messenger, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

/// An instance (and messenger) not yet owned by a [`Context`]: destroyed if
/// choosing or opening the device fails.
struct Partial {
    instance: Option<ash::Instance>,
    debug: Option<Debug>,
}

impl Drop for Partial {
    fn drop(&mut self) {
        unsafe {
            if let Some(d) = self.debug.take() {
                d.loader.destroy_debug_utils_messenger(d.messenger, None);
            }
            if let Some(i) = self.instance.take() {
                i.destroy_instance(None);
            }
        }
    }
}

impl Partial {
    fn finish(mut self, entry: ash::Entry, opts: &ContextOptions) -> Result<Context, VulkanError> {
        let Some(instance) = self.instance.clone() else {
            return Err(VulkanError::Internal("no instance".into()));
        };
        let (physical, family, props) = choose(&instance, &opts.device)?;
        let features = unsafe { instance.get_physical_device_features(physical) };
        let robust = features.robust_buffer_access == vk::TRUE;
        let enabled = vk::PhysicalDeviceFeatures::default().robust_buffer_access(robust);
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let statistics = crate::statistics::supported(&instance, physical);
        let extensions = [ash::khr::pipeline_executable_properties::NAME.as_ptr()];
        let mut executable_info =
            vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
                .pipeline_executable_info(true);
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_features(&enabled);
        if statistics {
            info = info
                .enabled_extension_names(&extensions)
                .push_next(&mut executable_info);
        }
        // SAFETY: `physical` came from this instance; `info` outlives the call.
        let device = unsafe { instance.create_device(physical, &info, None) }
            .map_err(|e| VulkanError::Unavailable(format!("opening the device: {e}")))?;
        let made = (|| -> Result<_, VulkanError> {
            let queue = unsafe { device.get_device_queue(family, 0) };
            let pool = unsafe {
                device.create_command_pool(
                    &vk::CommandPoolCreateInfo::default().queue_family_index(family),
                    None,
                )
            }
            .map_err(vk_err("creating a command pool"))?;
            let cmd = unsafe {
                device.allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
            }
            .map_err(vk_err("allocating a command buffer"))?[0];
            let fence = unsafe { device.create_fence(&vk::FenceCreateInfo::default(), None) }
                .map_err(vk_err("creating a fence"))?;
            let cache = unsafe {
                device.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
            }
            .map_err(vk_err("creating a pipeline cache"))?;
            Ok((queue, OneShot { pool, cmd, fence }, cache))
        })();
        let (queue, one_shot, pipeline_cache) = match made {
            Ok(m) => m,
            Err(e) => {
                unsafe { device.destroy_device(None) };
                return Err(e);
            }
        };
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let timestamp_period = (props.limits.timestamp_compute_and_graphics == vk::TRUE
            && families[family as usize].timestamp_valid_bits > 0)
            .then_some(f64::from(props.limits.timestamp_period));
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let info = device_info(&props);
        let debug = self.debug.take();
        self.instance = None;
        let stats_loader = statistics
            .then(|| ash::khr::pipeline_executable_properties::Device::new(&instance, &device));
        Ok(Context {
            _entry: entry,
            instance,
            debug,
            device,
            family,
            queue: Mutex::new(queue),
            memory,
            limits: props.limits,
            timestamp_period,
            pipeline_cache,
            spirv: Mutex::new(HashMap::new()),
            statistics: stats_loader,
            one_shot: Mutex::new(one_shot),
            info,
        })
    }
}

/// Picks the device and its compute queue family.
fn choose(
    instance: &ash::Instance,
    choice: &DeviceChoice,
) -> Result<(vk::PhysicalDevice, u32, vk::PhysicalDeviceProperties), VulkanError> {
    let devices = unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| VulkanError::Unavailable(format!("listing devices: {e}")))?;
    let mut usable = Vec::new();
    for (index, &pd) in devices.iter().enumerate() {
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let Some(family) = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
        else {
            continue;
        };
        usable.push((index, pd, family as u32, props));
    }
    let rank = |t: vk::PhysicalDeviceType| match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    };
    let names: Vec<String> = usable.iter().map(|u| device_info(&u.3).name).collect();
    let picked = match choice {
        DeviceChoice::Fastest => usable.iter().min_by_key(|u| rank(u.3.device_type)),
        DeviceChoice::Index(n) => usable.iter().find(|u| u.0 == *n),
        DeviceChoice::Named(text) => usable
            .iter()
            .zip(&names)
            .find(|(_, name)| name.contains(text.as_str()))
            .map(|(u, _)| u),
    };
    let Some(&(_, pd, family, props)) = picked else {
        return Err(VulkanError::Unavailable(format!(
            "no device with a compute queue matches {choice:?} (devices: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    };
    Ok((pd, family, props))
}

fn device_info(p: &vk::PhysicalDeviceProperties) -> DeviceInfo {
    let name = p
        .device_name_as_c_str()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unnamed device".into());
    let (kind, software) = match p.device_type {
        vk::PhysicalDeviceType::DISCRETE_GPU => ("discrete GPU", false),
        vk::PhysicalDeviceType::INTEGRATED_GPU => ("integrated GPU", false),
        vk::PhysicalDeviceType::VIRTUAL_GPU => ("virtual GPU", false),
        vk::PhysicalDeviceType::CPU => ("software (CPU)", true),
        _ => ("unknown device type", false),
    };
    let v = p.api_version;
    DeviceInfo {
        name,
        kind,
        software,
        driver: format!("{:#x}", p.driver_version),
        api: (
            vk::api_version_major(v),
            vk::api_version_minor(v),
            vk::api_version_patch(v),
        ),
    }
}

fn messenger(entry: &ash::Entry, instance: &ash::Instance) -> Result<Debug, VulkanError> {
    let loader = ash::ext::debug_utils::Instance::new(entry, instance);
    let messages = Box::new(Messages(Mutex::new(Vec::new())));
    let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(on_message))
        .user_data(&*messages as *const Messages as *mut c_void);
    // SAFETY: `messages` lives in the box as long as the messenger does
    // (both owned by `Debug`, the messenger destroyed first).
    let messenger = unsafe { loader.create_debug_utils_messenger(&info, None) }
        .map_err(|e| VulkanError::Unavailable(format!("creating the validation messenger: {e}")))?;
    Ok(Debug {
        loader,
        messenger,
        messages,
    })
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data, and `user` is the
    // `Messages` the messenger was created with.
    let (Some(data), Some(messages)) = (unsafe { data.as_ref() }, unsafe {
        (user as *const Messages).as_ref()
    }) else {
        return vk::FALSE;
    };
    let text = unsafe { data.message_as_c_str() }
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let level = if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        "error"
    } else {
        "warning"
    };
    if let Ok(mut m) = messages.0.lock() {
        m.push(format!("{level}: {text}"));
    }
    vk::FALSE
}
