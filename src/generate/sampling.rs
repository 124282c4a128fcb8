//! Choosing the next token from a row of logits: greedy (the first largest
//! logit, as `argmax` and PyTorch's greedy search pick), or sampled with a
//! temperature, top-k and top-p (nucleus) filtering from a seeded
//! generator, so a run can be repeated.

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    Greedy,
    /// Sampled from the softmax of `logits / temperature`, restricted to
    /// the `top_k` most likely tokens (0: all) and then to the fewest
    /// whose probabilities sum to `top_p` (1: all).
    Random {
        temperature: f32,
        top_k: usize,
        top_p: f32,
        seed: u64,
    },
}

impl Sampling {
    /// Checks the parameters: a positive temperature, `top_p` in (0, 1].
    pub fn check(&self) -> Result<(), String> {
        if let Sampling::Random {
            temperature, top_p, ..
        } = *self
        {
            if !(temperature > 0.0 && temperature.is_finite()) {
                return Err(format!("temperature {temperature}: it must be positive"));
            }
            if !(top_p > 0.0 && top_p <= 1.0) {
                return Err(format!("top-p {top_p}: it must lie in (0, 1]"));
            }
        }
        Ok(())
    }
}

/// A small, seeded generator (SplitMix64): the same seed gives the same
/// tokens on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform draw in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The index of the first largest value; NaNs are never chosen (a row of
/// NaNs gives 0). The largest value first, sixteen lanes at a time (the
/// compare vectorizes; a vocabulary of 50k at batch 8 is 400k values a
/// token), then the first index holding it.
pub fn argmax(row: &[f32]) -> usize {
    const LANES: usize = 16;
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = row.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            if v > *m {
                *m = v;
            }
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &v in lanes.iter().chain(rest) {
        if v > max {
            max = v;
        }
    }
    if max == f32::NEG_INFINITY {
        return 0;
    }
    row.iter().position(|&v| v == max).unwrap_or(0)
}

/// The next token of one row.
pub fn choose(row: &[f32], sampling: &Sampling, rng: &mut Rng) -> usize {
    let Sampling::Random {
        temperature,
        top_k,
        top_p,
        ..
    } = *sampling
    else {
        return argmax(row);
    };
    let mut order: Vec<usize> = (0..row.len()).filter(|&i| !row[i].is_nan()).collect();
    if order.is_empty() {
        return 0;
    }
    // Most likely first; ties keep the lower index first, as greedy does.
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    if top_k > 0 {
        order.truncate(top_k);
    }
    let max = f64::from(row[order[0]]);
    let t = f64::from(temperature);
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| ((f64::from(row[i]) - max) / t).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    // The nucleus: the fewest most likely tokens holding top_p of the mass.
    let mut kept = weights.len();
    let mut mass = 0.0;
    for (k, w) in weights.iter().enumerate() {
        mass += w / total;
        if mass >= f64::from(top_p) {
            kept = k + 1;
            break;
        }
    }
    let kept_total: f64 = weights[..kept].iter().sum();
    let mut draw = rng.unit() * kept_total;
    for (k, w) in weights[..kept].iter().enumerate() {
        if draw < *w {
            return order[k];
        }
        draw -= w;
    }
    order[kept - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_largest_and_skips_nans() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, 0.25]), 1);
        assert_eq!(argmax(&[f32::NAN, f32::NAN]), 0);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NAN, f32::NEG_INFINITY]), 0);
        assert_eq!(argmax(&[]), 0);
    }

    /// The lane-wise argmax is the plain scan's (first strictly larger
    /// value) on rows of every length around the lane count, with ties,
    /// NaNs and infinities.
    #[test]
    fn argmax_is_the_first_largest_of_a_plain_scan() {
        let scan = |row: &[f32]| {
            let (mut best, mut max) = (0, f32::NEG_INFINITY);
            for (i, &v) in row.iter().enumerate() {
                if v > max {
                    (best, max) = (i, v);
                }
            }
            best
        };
        let mut rng = Rng::new(3);
        for len in 0..70 {
            for _ in 0..20 {
                let row: Vec<f32> = (0..len)
                    .map(|_| match (rng.unit() * 10.0) as u32 {
                        0 => f32::NAN,
                        1 => f32::NEG_INFINITY,
                        2 => 4.0,
                        _ => (rng.unit() * 8.0 - 4.0) as f32,
                    })
                    .collect();
                assert_eq!(argmax(&row), scan(&row), "{row:?}");
            }
        }
    }

    #[test]
    fn top_k_of_one_is_greedy_and_a_seed_repeats() {
        let row = [0.1, 2.0, 1.9, -3.0, 1.95];
        let one = Sampling::Random {
            temperature: 1.0,
            top_k: 1,
            top_p: 1.0,
            seed: 7,
        };
        let mut rng = Rng::new(7);
        assert!((0..50).all(|_| choose(&row, &one, &mut rng) == 1));
        let many = Sampling::Random {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 7,
        };
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..64)
                .map(|_| choose(&row, &many, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        // Every token has some mass; the unlikely one is rare but the
        // three likely ones all come up in 64 draws.
        let d = draw(3);
        assert!([1, 2, 4].iter().all(|t| d.contains(t)));
    }

    #[test]
    fn top_p_keeps_the_nucleus_only() {
        // Softmax of these is about [0.88, 0.12, ~0]: top-p 0.5 keeps one.
        let row = [4.0, 2.0, -10.0];
        let s = Sampling::Random {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.5,
            seed: 1,
        };
        let mut rng = Rng::new(1);
        assert!((0..100).all(|_| choose(&row, &s, &mut rng) == 0));
        assert!(Sampling::Random {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0
        }
        .check()
        .is_err());
    }
}
