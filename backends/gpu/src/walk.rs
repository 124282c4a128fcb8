//! The host's walk over a schedule's step tree, the same on every GPU
//! device: launches in order, an `if` reads its condition back and runs one
//! branch, a loop reads its trip count (when the plan reads it) and, with a
//! condition, the condition before each round. A device supplies how it
//! launches, how it reads a few bytes back, and what it does between rounds.
//!
//! A loop runs at most a limit of rounds (the session's
//! `Limits::max_loop_iterations`): a trip count of 2^62 in a model is an
//! error naming the node, before the first round where the count alone
//! decides, else once the limit is reached with more rounds to go.

use crate::schedule::{Step, Trip};

/// Rounds one loop may run unless the executable is told otherwise: the
/// CPU backend's default (`RunLimits::max_loop_iterations`).
pub const MAX_ROUNDS: u64 = 1 << 20;

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
    /// The device's error naming node `node` (from ONNX `origin`).
    fn node_error(&self, node: &str, origin: &[String], reason: String) -> Self::Error;
}

/// Walks `steps` on `device`, each loop at most `max_rounds` rounds.
pub fn walk<W: Walk + ?Sized>(
    steps: &[Step],
    device: &mut W,
    max_rounds: u64,
) -> Result<(), W::Error> {
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
                walk(if c[0] != 0 { then } else { otherwise }, device, max_rounds)?;
            }
            Step::Loop {
                node,
                origin,
                trip,
                cond,
                body,
            } => {
                let trip = match trip {
                    Trip::Count(n) => *n,
                    Trip::Read(r) => i64::from_le_bytes(device.read(r.offset)?).max(0) as u64,
                };
                let limit = "the limit is Limits::max_loop_iterations (--max-loop-iterations)";
                if cond.is_none() && trip > max_rounds {
                    return Err(device.node_error(
                        node,
                        origin,
                        format!("the loop would run {trip} iterations; {limit}, {max_rounds}"),
                    ));
                }
                for round in 0..trip {
                    if let Some(c) = cond {
                        if device.read(c.offset)?[0] == 0 {
                            break;
                        }
                    }
                    if round == max_rounds {
                        return Err(device.node_error(
                            node,
                            origin,
                            format!(
                                "the loop ran {max_rounds} iterations and would run more (trip \
                                 count {trip}); {limit}, {max_rounds}"
                            ),
                        ));
                    }
                    walk(body, device, max_rounds)?;
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
        fn node_error(&self, node: &str, _: &[String], reason: String) -> String {
            format!("{node}: {reason}")
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
        walk(&steps, &mut log, MAX_ROUNDS).unwrap();
        assert_eq!(log.launched, [0, 2, 3, 3, 3]);
        assert_eq!(log.rounds, 3);
    }

    #[test]
    fn a_loop_past_the_limit_is_an_error_naming_it() {
        let at = |offset| Range { offset, bytes: 8 };
        let lp = |trip, cond| Step::Loop {
            node: "loop".into(),
            origin: vec!["Loop_7".into()],
            trip,
            cond,
            body: vec![Step::Dispatch(0)],
        };
        let log = |cond: u8| Log {
            launched: Vec::new(),
            rounds: 0,
            values: vec![
                (8, [cond, 0, 0, 0, 0, 0, 0, 0]),
                (16, (1i64 << 62).to_le_bytes()),
            ],
        };
        // A count alone decides: refused before the first round.
        let mut l = log(1);
        let e = walk(&[lp(Trip::Read(at(16)), None)], &mut l, 5).unwrap_err();
        assert!(
            e.contains("loop: the loop would run 4611686018427387904"),
            "{e}"
        );
        assert!(l.launched.is_empty());
        // A condition that stays true: the limit's rounds, then the error.
        let mut l = log(1);
        let e = walk(&[lp(Trip::Count(1 << 62), Some(at(8)))], &mut l, 5).unwrap_err();
        assert!(e.contains("ran 5 iterations and would run more"), "{e}");
        assert_eq!(l.rounds, 5);
        // At the limit exactly, or ended by the condition: no error.
        let mut l = log(1);
        walk(&[lp(Trip::Count(5), None)], &mut l, 5).unwrap();
        assert_eq!(l.rounds, 5);
        let mut l = log(0);
        walk(&[lp(Trip::Count(1 << 62), Some(at(8)))], &mut l, 5).unwrap();
        assert_eq!(l.rounds, 0);
    }
}
