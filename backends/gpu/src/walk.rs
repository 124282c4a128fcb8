//! The host's walk over a schedule's step tree, the same on every GPU
//! device: launches in order, an `if` reads its condition back and runs one
//! branch, a loop reads its trip count (when the plan reads it) and, with a
//! condition, the condition before each round. A device supplies how it
//! launches, how it reads a few bytes back, and what it does between rounds.

use crate::schedule::{Step, Trip};

/// What a device does as the host walks the step tree.
pub trait Walk {
    type Error;
    /// Runs (or records) launch `i` of the schedule.
    fn launch(&mut self, i: usize) -> Result<(), Self::Error>;
    /// The 8 bytes at `offset` of the device buffer, after all work before.
    fn read(&mut self, offset: u64) -> Result<[u8; 8], Self::Error>;
    /// After each loop round (a device may submit what it recorded).
    fn round(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Walks `steps` on `device`.
pub fn walk<W: Walk + ?Sized>(steps: &[Step], device: &mut W) -> Result<(), W::Error> {
    for step in steps {
        match step {
            Step::Dispatch(i) => device.launch(*i)?,
            Step::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                let c = device.read(cond.offset)?;
                walk(if c[0] != 0 { then } else { otherwise }, device)?;
            }
            Step::Loop {
                trip, cond, body, ..
            } => {
                let trip = match trip {
                    Trip::Count(n) => *n,
                    Trip::Read(r) => i64::from_le_bytes(device.read(r.offset)?).max(0) as u64,
                };
                for _ in 0..trip {
                    if let Some(c) = cond {
                        if device.read(c.offset)?[0] == 0 {
                            break;
                        }
                    }
                    walk(body, device)?;
                    device.round()?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Range;

    /// Records launches; reads answer from a fixed table.
    struct Log {
        launched: Vec<usize>,
        rounds: usize,
        values: Vec<(u64, [u8; 8])>,
    }

    impl Walk for Log {
        type Error = String;
        fn launch(&mut self, i: usize) -> Result<(), String> {
            self.launched.push(i);
            Ok(())
        }
        fn read(&mut self, offset: u64) -> Result<[u8; 8], String> {
            let (_, v) = self
                .values
                .iter()
                .find(|(o, _)| *o == offset)
                .ok_or("unread")?;
            Ok(*v)
        }
        fn round(&mut self) -> Result<(), String> {
            self.rounds += 1;
            Ok(())
        }
    }

    #[test]
    fn ifs_take_one_branch_and_loops_run_their_read_trip_count() {
        let at = |offset| Range { offset, bytes: 8 };
        let steps = vec![
            Step::Dispatch(0),
            Step::If {
                node: "if".into(),
                origin: Vec::new(),
                cond: at(8),
                then: vec![Step::Dispatch(1)],
                otherwise: vec![Step::Dispatch(2)],
            },
            Step::Loop {
                node: "loop".into(),
                origin: Vec::new(),
                trip: Trip::Read(at(16)),
                cond: None,
                body: vec![Step::Dispatch(3)],
            },
        ];
        let mut log = Log {
            launched: Vec::new(),
            rounds: 0,
            values: vec![(8, [0; 8]), (16, 3i64.to_le_bytes())],
        };
        walk(&steps, &mut log).unwrap();
        assert_eq!(log.launched, [0, 2, 3, 3, 3]);
        assert_eq!(log.rounds, 3);
    }
}
