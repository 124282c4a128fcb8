//! Programmatic dependent launch (compute capability 9.0 and newer): which
//! kernels may be placed on the SMs before the kernel ahead of them in the
//! stream has finished, and the launch that lets them.
//!
//! A kernel launched with programmatic stream serialization may start once
//! every block of the kernel before it has started (and called
//! `griddepcontrol.launch_dependents`) or exited; it must then wait
//! (`griddepcontrol.wait`) before touching memory that kernel writes or
//! reads. Every rlx kernel does both as its first statement
//! (`rlx_grid_wait` in `kernels/cuda/prelude.cuh`), but the launch does not
//! take that on trust: an entry is launched so only when its PTX waits
//! before any memory access, branch or return ([`waiting_entries`]). PTX
//! from another source (an artifact's, compiled for an architecture before
//! sm_90, where the wait compiles away) keeps plain launches.

use std::collections::HashSet;
use std::ffi::c_void;

use cudarc::driver::sys as ds;

/// The entries of `ptx` whose first memory access, branch, call, barrier or
/// return comes after a `griddepcontrol.wait`.
pub fn waiting_entries(ptx: &str) -> HashSet<String> {
    let mut waiting = HashSet::new();
    let mut lines = ptx.lines();
    while let Some(line) = lines.next() {
        let Some(name) = entry_name(line) else {
            continue;
        };
        // The parameter list and performance directives, up to the body.
        if !lines.by_ref().any(|l| l.trim() == "{") {
            break;
        }
        // The body, to its closing brace (inline assembly may open scopes
        // of its own), noting whether the wait comes before anything else.
        let (mut depth, mut waits, mut decided) = (1usize, false, false);
        for l in lines.by_ref() {
            let l = l.trim();
            if l == "}" {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            } else if l == "{" {
                depth += 1;
            }
            if decided {
                continue;
            }
            if l.starts_with("griddepcontrol.wait") {
                (waits, decided) = (true, true);
            } else if !before_wait(l) {
                decided = true;
            }
        }
        if waits {
            waiting.insert(name.to_string());
        }
    }
    waiting
}

/// The names of `ptx`'s entries, in order.
#[cfg(test)]
pub fn entries(ptx: &str) -> Vec<&str> {
    ptx.lines().filter_map(entry_name).collect()
}

/// `NAME` of a `.entry NAME(` line (`.visible .entry`, `.weak .entry`).
fn entry_name(line: &str) -> Option<&str> {
    let at = line.find(".entry ")?;
    let rest = line[at + ".entry ".len()..].trim_start();
    let end = rest.find(['(', ' ']).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Whether a body line may come before the wait: declarations, comments,
/// parameter loads, the thread's local memory, moves, address conversions
/// and arithmetic. Labels,
/// predicated instructions, branches, returns, barriers, calls and every
/// other memory access may not.
fn before_wait(l: &str) -> bool {
    const REFUSED: &[&str] = &[
        "ld.",
        "ldu.",
        "st.",
        "atom.",
        "red.",
        "cp.",
        "bra",
        "ret",
        "exit",
        "call",
        "bar",
        "barrier",
        "membar",
        "fence",
        "tex.",
        "tld4",
        "suld",
        "sust",
        "sured",
        "prefetch",
        "mbarrier",
        "trap",
        "@",
        "wgmma",
        "tensormap",
        "stmatrix",
        "ldmatrix",
        "multimem",
        "discard",
        "applypriority",
        "createpolicy",
        "isspacep",
    ];
    if l.is_empty() || l.starts_with("//") || l.starts_with('.') {
        return true;
    }
    if l.ends_with(':') {
        return false; // a label: a branch could land past the wait
    }
    // Parameters and the thread's own local memory (a parameter struct
    // copied to be indexed) are no other kernel's.
    const ALLOWED: &[&str] = &[
        "ld.param",
        "ld.local",
        "st.local",
        "griddepcontrol.launch_dependents",
    ];
    if ALLOWED.iter().any(|a| l.starts_with(a)) {
        return true;
    }
    !REFUSED.iter().any(|r| l.starts_with(r))
}

/// Launches `f` with programmatic stream serialization on `stream`.
///
/// # Safety
/// As `cuLaunchKernel`: `args` match the kernel's parameters and every
/// pointer among them is valid for the launch; and the kernel is one of
/// [`waiting_entries`].
pub unsafe fn launch(
    f: ds::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    stream: ds::CUstream,
    args: &mut [*mut c_void],
) -> Result<(), ds::CUresult> {
    // SAFETY: a zeroed attribute is a valid C struct (an id and a union of
    // plain integers); the fields set below are the ones the id reads.
    let mut attr: ds::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = ds::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let config = ds::CUlaunchConfig {
        gridDimX: grid[0],
        gridDimY: grid[1],
        gridDimZ: grid[2],
        blockDimX: block[0],
        blockDimY: block[1],
        blockDimZ: block[2],
        sharedMemBytes: shared,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: the caller's contract; `config` and `attr` outlive the call.
    let r = unsafe { ds::cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) };
    match r {
        ds::CUresult::CUDA_SUCCESS => Ok(()),
        e => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "
.version 8.8
.target sm_90
.address_size 64

.visible .entry waits(
	.param .u64 waits_param_0,
	.param .align 4 .b8 waits_param_1[8]
)
.maxntid 256, 1, 1
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [waits_param_0];
	ld.param.u32 	%r2, [waits_param_1];
	st.local.u32 	[%rd2], %r2;
	griddepcontrol.launch_dependents;
	griddepcontrol.wait;
	{
	.reg .b16 	%rs<2>;
	cvt.rn.f16.f32 	%rs1, %f1;
	}
	ld.global.u32 	%r1, [%rd1];
	ret;

}
.visible .entry loads_first(
	.param .u64 loads_first_param_0
)
{
	.reg .b32 	%r<4>;
	ld.param.u64 	%rd1, [loads_first_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	ld.global.u32 	%r1, [%rd2];
	griddepcontrol.wait;
	ret;

}
.visible .entry branches_first(
	.param .u64 branches_first_param_0
)
{
	.reg .pred 	%p<2>;
	setp.eq.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB2_2;
	griddepcontrol.wait;
$L__BB2_2:
	ret;

}
.visible .entry never(
	.param .u64 never_param_0
)
{
	ret;

}
.visible .entry waits_late(
	.param .u64 waits_late_param_0
)
{
	.reg .b32 	%r<4>;
	mov.u32 	%r1, %tid.x;
	add.s32 	%r2, %r1, 1;
	griddepcontrol.wait;
	ret;

}
";

    #[test]
    fn only_entries_that_wait_before_touching_memory_overlap() {
        let w = waiting_entries(PTX);
        let mut names: Vec<&str> = w.iter().map(String::as_str).collect();
        names.sort();
        assert_eq!(names, ["waits", "waits_late"]);
    }

    #[test]
    fn entry_names_are_read_from_their_declarations() {
        assert_eq!(entry_name(".visible .entry cast_any("), Some("cast_any"));
        assert_eq!(entry_name(".weak .entry w ("), Some("w"));
        assert_eq!(entry_name("\tret;"), None);
    }
}
