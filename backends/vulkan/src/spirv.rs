//! SPIR-V from the plan's WGSL, by naga in-process (no SDK, no shader
//! compiler on the machine): the pipelines' sources are made per plan
//! (parameter structs, fused element-wise expressions), so they are
//! translated when an executable loads, once per source and context.

use std::sync::Arc;

use crate::context::Context;

/// The SPIR-V words of the compute entry point `main` of `source`.
pub(crate) fn spirv(ctx: &Context, name: &str, source: &str) -> Result<Arc<Vec<u32>>, String> {
    let cache = || ctx.spirv.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(words) = cache().get(source) {
        return Ok(words.clone());
    }
    let words = Arc::new(translate(name, source)?);
    cache().insert(source.to_string(), words.clone());
    Ok(words)
}

fn translate(name: &str, source: &str) -> Result<Vec<u32>, String> {
    use naga::back::spv;
    use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("{name}: {}", e.emit_to_string(source)))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        // pack2x16float and friends: core WGSL.
        naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
    )
    .validate(&module)
    .map_err(|e| format!("{name}: {}", e.emit_to_string(source)))?;
    let options = spv::Options {
        // Vulkan 1.1 reads SPIR-V 1.3.
        lang_version: (1, 3),
        flags: spv::WriterFlags::empty(),
        // WGSL's @group/@binding become the descriptor set and binding.
        fake_missing_bindings: true,
        // WGSL's semantics for out-of-range accesses: indices are clamped
        // into the array or buffer (what wgpu does on devices without
        // robustBufferAccess2; a clamp per access).
        bounds_check_policies: BoundsCheckPolicies {
            index: BoundsCheckPolicy::Restrict,
            buffer: BoundsCheckPolicy::Restrict,
            image_load: BoundsCheckPolicy::Restrict,
            binding_array: BoundsCheckPolicy::Unchecked,
        },
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".into(),
    };
    spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| format!("{name}: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn wgsl_becomes_spirv_with_its_magic_number() {
        let src = "@group(0) @binding(0) var<storage, read_write> a: array<u32>;\n\
                   @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n\
                   if g.x < arrayLength(&a) { a[g.x] = a[g.x] * 2u; } }";
        let words = super::translate("double", src).unwrap();
        assert_eq!(words[0], 0x0723_0203);
        let bad = super::translate("bad", "fn main( {").unwrap_err();
        assert!(bad.starts_with("bad: "), "{bad}");
    }
}
