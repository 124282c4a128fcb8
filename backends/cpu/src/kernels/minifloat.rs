//! 8-bit and 4-bit float formats: exact decoding, and encoding with
//! round-to-nearest-even, overflow and saturation as ONNX (ml_dtypes) defines.

use rlx_ir::DType;

/// What an out-of-range value becomes without saturation.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Nan,
    Inf,
    /// Formats without NaN or infinity clamp (float4).
    Clamp,
}

/// One minifloat format.
pub struct Format {
    mbits: u32,
    bias: i32,
    /// Codes that are NaN (besides the exponent-all-ones rule of E5M2).
    nan: fn(u8) -> bool,
    /// E5M2 has IEEE infinities.
    ieee: bool,
    /// FNUZ formats have no negative zero (0x80 is NaN).
    uz: bool,
    overflow: Overflow,
    sign_bit: u8,
    nan_code: u8,
}

impl Format {
    pub fn of(d: DType) -> Option<Format> {
        Some(match d {
            DType::F8E4M3FN => Format {
                mbits: 3,
                bias: 7,
                nan: |c| c & 0x7f == 0x7f,
                ieee: false,
                uz: false,
                overflow: Overflow::Nan,
                sign_bit: 0x80,
                nan_code: 0x7f,
            },
            DType::F8E4M3FNUZ => Format {
                mbits: 3,
                bias: 8,
                nan: |c| c == 0x80,
                ieee: false,
                uz: true,
                overflow: Overflow::Nan,
                sign_bit: 0x80,
                nan_code: 0x80,
            },
            DType::F8E5M2 => Format {
                mbits: 2,
                bias: 15,
                nan: |c| c & 0x7f > 0x7c,
                ieee: true,
                uz: false,
                overflow: Overflow::Inf,
                sign_bit: 0x80,
                nan_code: 0x7e,
            },
            DType::F8E5M2FNUZ => Format {
                mbits: 2,
                bias: 16,
                nan: |c| c == 0x80,
                ieee: false,
                uz: true,
                overflow: Overflow::Nan,
                sign_bit: 0x80,
                nan_code: 0x80,
            },
            DType::F4E2M1 => Format {
                mbits: 1,
                bias: 1,
                nan: |_| false,
                ieee: false,
                uz: false,
                overflow: Overflow::Clamp,
                sign_bit: 0x8,
                nan_code: 0x8,
            },
            _ => return None,
        })
    }

    fn magnitude_mask(&self) -> u8 {
        self.sign_bit - 1
    }

    /// The value of a code.
    pub fn decode(&self, c: u8) -> f64 {
        if (self.nan)(c) {
            return f64::NAN;
        }
        let neg = c & self.sign_bit != 0;
        let mag = c & self.magnitude_mask();
        if self.ieee && mag == 0x7c {
            return if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
        let v = self.positive(mag);
        if neg {
            -v
        } else {
            v
        }
    }

    fn positive(&self, mag: u8) -> f64 {
        let e = (mag >> self.mbits) as i32;
        let m = (mag & ((1 << self.mbits) - 1)) as f64;
        let scale = (1u32 << self.mbits) as f64;
        if e == 0 {
            m / scale * 2f64.powi(1 - self.bias)
        } else {
            (1.0 + m / scale) * 2f64.powi(e - self.bias)
        }
    }

    /// The largest finite magnitude code.
    fn max_code(&self) -> u8 {
        let mut c = self.magnitude_mask();
        while (self.nan)(c) || (self.ieee && c >= 0x7c) {
            c -= 1;
        }
        c
    }

    /// Encodes `x`, rounding to nearest even.
    pub fn encode(&self, x: f64, saturate: bool) -> u8 {
        if x.is_nan() {
            return self.nan_code;
        }
        let neg = x.is_sign_negative();
        let sign = if neg { self.sign_bit } else { 0 };
        let max_code = self.max_code();
        let max = self.positive(max_code);
        let mut a = x.abs();
        if saturate || self.overflow == Overflow::Clamp {
            a = a.min(max);
        }
        // Rounding boundary above max: halfway to the next (virtual) code.
        let ulp = max - self.positive(max_code - 1);
        let limit = max + ulp / 2.0;
        if a > limit || (a == limit && max_code & 1 == 1) {
            return match self.overflow {
                Overflow::Nan if self.uz => self.nan_code,
                Overflow::Nan => sign | self.nan_code,
                Overflow::Inf => sign | 0x7c,
                Overflow::Clamp => sign | max_code,
            };
        }
        // Binary search over the monotone positive codes 0..=max_code.
        let (mut lo, mut hi) = (0u8, max_code);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.positive(mid) <= a {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let mut code = lo;
        if code < max_code {
            let (below, above) = (self.positive(code), self.positive(code + 1));
            let (db, da) = (a - below, above - a);
            if da < db || (da == db && code & 1 == 1) {
                code += 1;
            }
        }
        if code == 0 && self.uz {
            return 0;
        }
        sign | code
    }
}

/// Decodes an E8M0 scale: `2^(c - 127)`, 0xff is NaN.
pub fn e8m0_decode(c: u8) -> f64 {
    if c == 0xff {
        f64::NAN
    } else {
        2f64.powi(c as i32 - 127)
    }
}

/// Encodes an f32 as E8M0 with the ONNX rounding modes ("up", "down", "nearest").
pub fn e8m0_encode(x: f32, saturate: bool, mode: rlx_ir::ops::RoundMode) -> u8 {
    use rlx_ir::ops::RoundMode;
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as u16;
    if exp == 0xff {
        return 0xff;
    }
    let frac = bits & 0x7f_ffff;
    let round_up = match mode {
        RoundMode::Down => false,
        RoundMode::Up => frac > 0,
        RoundMode::Nearest => {
            let g = bits & 0x40_0000 != 0;
            let r = bits & 0x20_0000 != 0;
            let s = bits & 0x1f_ffff != 0;
            g && (r || s || exp > 0)
        }
    };
    let mut e = exp;
    if round_up && !(saturate && exp == 0xfe) {
        e += 1;
    }
    e as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_ml_dtypes() {
        // Values checked against ml_dtypes 0.6 (the ONNX reference).
        let f = Format::of(DType::F8E4M3FN).unwrap();
        let got: Vec<u8> = [0.1, 464.0, 465.0, f64::INFINITY, -0.0, -1e-3]
            .iter()
            .map(|&v| f.encode(v, false))
            .collect();
        assert_eq!(got, vec![0x1d, 0x7e, 0x7f, 0x7f, 0x80, 0x81]);
        assert_eq!(f.encode(1e9, true), 0x7e);
        assert_eq!(f.decode(0x7e), 448.0);
        let f = Format::of(DType::F8E4M3FNUZ).unwrap();
        assert_eq!(
            [0.1, 464.0, -0.0].map(|v| f.encode(v, false)),
            [0x25, 0x80, 0x00]
        );
        assert_eq!(f.decode(0x7f), 240.0);
        let f = Format::of(DType::F8E5M2).unwrap();
        assert_eq!(
            [0.1, 464.0, 480.0, 1e9, f64::NAN].map(|v| f.encode(v, false)),
            [0x2e, 0x5f, 0x60, 0x7c, 0x7e]
        );
        let f = Format::of(DType::F8E5M2FNUZ).unwrap();
        assert_eq!(
            [0.1, 464.0, 480.0, 1e9, -1e-3].map(|v| f.encode(v, false)),
            [0x32, 0x63, 0x64, 0x80, 0x98]
        );
        let f = Format::of(DType::F4E2M1).unwrap();
        assert_eq!(
            [5.0, 6.5, 100.0, 0.25, 0.75, 2.5, -0.0].map(|v| f.encode(v, false)),
            [0x6, 0x7, 0x7, 0x0, 0x2, 0x4, 0x8]
        );
        assert_eq!(f.decode(0xf), -6.0);
    }
}
