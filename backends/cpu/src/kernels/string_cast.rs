//! ONNX Cast to and from strings, as ONNX Runtime does it: floats print as
//! C's `%.8g` (`INF`, `-INF`, `NaN`), integers in decimal, bools as `1` and
//! `0`; strings parse as C's `strtod` (leading blanks, `INF`, `NaN`,
//! hexadecimal) into floats and as decimal integers into integers.

use rlx_ir::ops::values::{float_tensor, int_tensor};
use rlx_ir::ops::Op;
use rlx_ir::{DType, Node, Tensor};

use crate::kernel::{EvalCx, KernelError};

pub fn string_cast(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::StringCast(op) = &node.op else {
        return Err(KernelError::Internal("not string_cast".into()));
    };
    let x = &inputs[0];
    let dims = x.dims();
    let out = match x.strings() {
        Some(s) => parse(s, op.to, dims)?,
        None => Tensor::from_strings(dims, print(x)?)
            .map_err(|e| KernelError::Internal(e.to_string()))?,
    };
    Ok(vec![out])
}

/// Numbers as strings.
fn print(x: &Tensor) -> Result<Vec<String>, KernelError> {
    let d = x.dtype();
    let unsupported = || KernelError::Unsupported(format!("casting {d} to strings"));
    if d == DType::U64 {
        let v = x
            .values::<u64>()
            .map_err(|e| KernelError::Internal(e.to_string()))?;
        return Ok(v.iter().map(u64::to_string).collect());
    }
    if d.is_float() {
        let v = x.to_f64_vec().ok_or_else(unsupported)?;
        return Ok(v.into_iter().map(format_float).collect());
    }
    let v = x.to_i64_vec().ok_or_else(unsupported)?;
    Ok(v.iter().map(i64::to_string).collect())
}

/// Strings as numbers of `to`.
fn parse(s: &[String], to: DType, dims: &[usize]) -> Result<Tensor, KernelError> {
    let bad = |text: &str| KernelError::Value(format!("`{text}` is not a number to cast to {to}"));
    let made = if to.is_float() || to == DType::Bool {
        // An f32 parses as f32 (rounded once, as strtof does); narrower
        // floats round from the f64 value as a cast would.
        let v = s
            .iter()
            .map(|t| parse_float(t, to == DType::F32).ok_or_else(|| bad(t)))
            .collect::<Result<Vec<f64>, _>>()?;
        if to == DType::Bool {
            let b: Vec<i64> = v.iter().map(|&x| i64::from(x != 0.0)).collect();
            int_tensor(to, dims, &b)
        } else {
            float_tensor(to, dims, &v)
        }
    } else if to == DType::U64 {
        let v = s
            .iter()
            .map(|t| t.trim().parse::<u64>().map_err(|_| bad(t)))
            .collect::<Result<Vec<u64>, _>>()?;
        Tensor::from_slice(to, dims, &v).ok()
    } else {
        let v = s
            .iter()
            .map(|t| t.trim().parse::<i64>().map_err(|_| bad(t)))
            .collect::<Result<Vec<i64>, _>>()?;
        int_tensor(to, dims, &v)
    };
    made.ok_or_else(|| KernelError::Unsupported(format!("casting strings to {to}")))
}

/// C's `strtod` on a whole string (blanks around it allowed): an optional
/// sign, a decimal or hexadecimal (`0x1.8p3`) number, `inf`/`infinity`,
/// `nan`; with `single`, a decimal number rounds once to f32 (`strtof`).
fn parse_float(t: &str, single: bool) -> Option<f64> {
    let t = t.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    let v = if let Some(hex) = lower.strip_prefix("0x") {
        let (hex, exp) = match hex.split_once('p') {
            Some((h, e)) => (h, e.parse::<i32>().ok()?),
            None => (hex, 0),
        };
        let (int, frac) = hex.split_once('.').unwrap_or((hex, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let mut v = 0f64;
        for c in int.chars() {
            v = v * 16.0 + f64::from(c.to_digit(16)?);
        }
        let mut scale = 1.0 / 16.0;
        for c in frac.chars() {
            v += f64::from(c.to_digit(16)?) * scale;
            scale /= 16.0;
        }
        v * 2f64.powi(exp)
    } else {
        match lower.as_str() {
            "inf" | "infinity" => f64::INFINITY,
            "nan" => f64::NAN,
            _ if !lower.starts_with(|c: char| c.is_ascii_digit() || c == '.') => return None,
            _ if single => f64::from(lower.parse::<f32>().ok()?),
            _ => lower.parse().ok()?,
        }
    };
    Some(if neg { -v } else { v })
}

/// `%.8g`, as C's printf writes it, with ONNX Runtime's `INF`, `-INF` and
/// `NaN`.
pub(crate) fn format_float(v: f64) -> String {
    const DIGITS: usize = 8;
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-INF".into() } else { "INF".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // The exponent after rounding to DIGITS significant digits decides
    // between the two forms, as %g does.
    let sci = format!("{:.*e}", DIGITS - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= DIGITS as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs())
    } else {
        let decimals = (DIGITS as i32 - 1 - exp).max(0) as usize;
        trim(&format!("{v:.decimals$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ONNX Runtime 1.31 printed for these floats (f32 widened, as it does).
    #[test]
    fn floats_print_as_onnx_runtime_prints_them() {
        let f32s = [
            0.1f32,
            1.0 / 3.0,
            123456789.0,
            1e-5,
            1e-40,
            3.4e38,
            100.0,
            0.5,
        ];
        let want = [
            "0.1",
            "0.33333334",
            "1.2345679e+08",
            "9.9999997e-06",
            "9.9999461e-41",
            "3.4e+38",
            "100",
            "0.5",
        ];
        for (x, w) in f32s.iter().zip(want) {
            assert_eq!(format_float(f64::from(*x)), w, "{x}");
        }
        assert_eq!(format_float(1.0 / 3.0), "0.33333333");
        assert_eq!(format_float(1e-5), "1e-05");
        assert_eq!(format_float(-0.0), "-0");
        assert_eq!(format_float(f64::NEG_INFINITY), "-INF");
        assert_eq!(format_float(f64::NAN), "NaN");
        assert_eq!(format_float(99999999.5), "1e+08");
    }

    #[test]
    fn strings_parse_as_strtod() {
        let p = |s: &str| parse_float(s, false);
        assert_eq!(p("1.5"), Some(1.5));
        assert_eq!(p(" 2"), Some(2.0));
        assert_eq!(p("INF"), Some(f64::INFINITY));
        assert_eq!(p("-inf"), Some(f64::NEG_INFINITY));
        assert!(p("NaN").unwrap().is_nan());
        assert_eq!(p("1e3"), Some(1000.0));
        assert_eq!(p("0x10"), Some(16.0));
        assert_eq!(p("0x1.8p3"), Some(12.0));
        assert_eq!(p("1.5 "), Some(1.5));
        // Once-rounded to f32: a decimal just past a tie between two f32s.
        let tie = "1.00000005960464477539062500000001";
        assert_eq!(
            parse_float(tie, true),
            Some(f64::from(tie.parse::<f32>().unwrap()))
        );
        assert_eq!(p("abc"), None);
        assert_eq!(p(""), None);
    }
}
