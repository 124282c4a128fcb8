//! Where a device must wait between dispatches: the memory dependencies of
//! the schedule, from the byte ranges each dispatch reads and writes.
//!
//! Vulkan runs the dispatches of a command buffer with no ordering between
//! them unless a barrier says so; the plan places one before a dispatch that
//! reads or writes bytes an earlier dispatch since the last barrier wrote, or
//! writes bytes one of them read. Control flow ends a run of dispatches: the
//! first dispatch after an `if` or a loop, and the first of every body, waits
//! for everything before it (the host reads a condition back there, or a
//! body repeats). wgpu places its own barriers and ignores these.

use crate::schedule::{Dispatch, Range, Step};

/// Sets [`Dispatch::barrier`] on every dispatch of `steps`. The first
/// top-level dispatch needs none: a device's copies of the run's inputs end
/// with a barrier of their own.
pub fn place_barriers(steps: &[Step], dispatches: &mut [Dispatch]) {
    let mut open = Open {
        since: Some(Since::default()),
    };
    walk(steps, dispatches, &mut open);
}

/// The ranges read and written since the last barrier; `None` after control
/// flow, when the next dispatch waits for everything.
#[derive(Default)]
struct Open {
    since: Option<Since>,
}

#[derive(Default)]
struct Since {
    reads: Vec<Range>,
    writes: Vec<Range>,
}

fn walk(steps: &[Step], dispatches: &mut [Dispatch], open: &mut Open) {
    for step in steps {
        match step {
            Step::Dispatch(k) => {
                if let Some(d) = dispatches.get_mut(*k) {
                    visit(d, open);
                }
            }
            Step::If {
                then, otherwise, ..
            } => {
                for branch in [then, otherwise] {
                    walk(branch, dispatches, &mut Open::default());
                }
                open.since = None;
            }
            Step::Loop { body, .. } => {
                walk(body, dispatches, &mut Open::default());
                open.since = None;
            }
        }
    }
}

fn visit(d: &mut Dispatch, open: &mut Open) {
    let written = |i: usize| d.writes.get(i).copied().unwrap_or(true);
    d.barrier = match &open.since {
        // The first dispatch of a body or after control flow.
        None => true,
        Some(s) => d.operands.iter().enumerate().any(|(i, r)| {
            s.writes.iter().any(|w| overlaps(r, w))
                || (written(i) && s.reads.iter().any(|x| overlaps(r, x)))
        }),
    };
    if d.barrier {
        open.since = Some(Since::default());
    }
    let s = open.since.get_or_insert_with(Since::default);
    for (i, r) in d.operands.iter().enumerate() {
        if written(i) {
            s.writes.push(*r);
        } else {
            s.reads.push(*r);
        }
    }
}

/// Whether two byte ranges share a 4-byte word (kernels access words).
pub(crate) fn overlaps(a: &Range, b: &Range) -> bool {
    let (a0, a1) = (a.offset / 4, (a.offset + a.bytes).div_ceil(4));
    let (b0, b1) = (b.offset / 4, (b.offset + b.bytes).div_ceil(4));
    a0 < b1 && b0 < a1
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_gpu::ParamBlock;

    fn dispatch(operands: &[(u64, u64, bool)]) -> Dispatch {
        Dispatch {
            pipeline: 0,
            groups: [1, 1, 1],
            windows: Vec::new(),
            handles: Vec::new(),
            params: ParamBlock::of(&rlx_gpu::control::CounterParams { increment: 0 }),
            operands: operands
                .iter()
                .map(|&(offset, bytes, _)| Range { offset, bytes })
                .collect(),
            writes: operands.iter().map(|&(_, _, w)| w).collect(),
            barrier: false,
            node: String::new(),
            origin: Vec::new(),
        }
    }

    #[test]
    fn barriers_follow_read_after_write_write_after_read_and_control_flow() {
        let mut ds = vec![
            // 0: reads [0,16), writes [16,32)
            dispatch(&[(0, 16, false), (16, 16, true)]),
            // 1: reads [0,16) too, writes [32,48): independent of 0
            dispatch(&[(0, 16, false), (32, 16, true)]),
            // 2: reads 0's output: waits
            dispatch(&[(16, 16, false), (48, 16, true)]),
            // 3: writes [0,16), which 2 did not read but 0 and 1 did before
            //    the barrier at 2; after it, only 2's ranges are open: no wait
            dispatch(&[(64, 4, false), (0, 16, true)]),
            // 4: overwrites what 2 read (write after read): waits
            dispatch(&[(16, 2, true)]),
            // 5: first dispatch in a loop body, 6 after the loop
            dispatch(&[(100, 4, true)]),
            dispatch(&[(200, 4, true)]),
        ];
        let steps = vec![
            Step::Dispatch(0),
            Step::Dispatch(1),
            Step::Dispatch(2),
            Step::Dispatch(3),
            Step::Dispatch(4),
            Step::Loop {
                node: "l".into(),
                origin: Vec::new(),
                trip: rlx_gpu::Trip::Count(2),
                cond: None,
                body: vec![Step::Dispatch(5)],
            },
            Step::Dispatch(6),
        ];
        place_barriers(&steps, &mut ds);
        let got: Vec<bool> = ds.iter().map(|d| d.barrier).collect();
        assert_eq!(got, [false, false, true, false, true, true, true]);
    }

    #[test]
    fn ranges_overlap_by_word() {
        let r = |offset, bytes| Range { offset, bytes };
        assert!(overlaps(&r(0, 4), &r(3, 1)));
        assert!(!overlaps(&r(0, 4), &r(4, 4)));
        // A 2-byte write shares its word with its neighbour.
        assert!(overlaps(&r(0, 2), &r(2, 2)));
    }
}
