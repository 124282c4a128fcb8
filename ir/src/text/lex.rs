//! Tokens of the IR text form.

use std::fmt;

/// One token with its byte offset in the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: Tok,
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// `%12` or `%12.1` (output 1 of node 12).
    Value(u32, u16),
    /// `$3`: a named dim sub-expression (defined in the `dims { }` block).
    DimRef(u32),
    Ident(String),
    Str(String),
    Int(i128),
    /// A float literal, kept as text so that it parses exactly into any float type.
    Float(String),
    /// `# ...` up to the end of the line (the origin comment), trimmed.
    Comment(String),
    Punct(char),
    Arrow,
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Value(v, 0) => write!(f, "%{v}"),
            Tok::Value(v, p) => write!(f, "%{v}.{p}"),
            Tok::DimRef(k) => write!(f, "${k}"),
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Str(s) => write!(f, "{s:?}"),
            Tok::Int(i) => write!(f, "{i}"),
            Tok::Float(s) => f.write_str(s),
            Tok::Comment(_) => f.write_str("a comment"),
            Tok::Punct(c) => write!(f, "`{c}`"),
            Tok::Arrow => f.write_str("`->`"),
            Tok::Eof => f.write_str("end of input"),
        }
    }
}

/// A lexing error at a byte offset.
#[derive(Debug, Clone, PartialEq)]
pub struct LexError {
    pub offset: usize,
    pub message: String,
}

pub fn lex(src: &str) -> Result<Vec<Token>, LexError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |offset: usize, m: &str| LexError {
        offset,
        message: m.to_string(),
    };
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'#' => {
                let end = src[i..].find('\n').map_or(bytes.len(), |e| i + e);
                out.push(Token {
                    kind: Tok::Comment(src[i + 1..end].trim().to_string()),
                    offset: start,
                });
                i = end;
            }
            b'%' => {
                i += 1;
                let s = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                let n = src[s..i]
                    .parse()
                    .map_err(|_| err(start, "expected a value number after `%`"))?;
                let mut port = 0;
                if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                    let p = i;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                    port = src[p..i]
                        .parse()
                        .map_err(|_| err(start, "bad output index"))?;
                }
                out.push(Token {
                    kind: Tok::Value(n, port),
                    offset: start,
                });
            }
            b'$' => {
                i += 1;
                let s = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                let k = src[s..i]
                    .parse()
                    .map_err(|_| err(start, "expected a dim number after `$`"))?;
                out.push(Token {
                    kind: Tok::DimRef(k),
                    offset: start,
                });
            }
            b'"' => {
                i += 1;
                let mut s = String::new();
                loop {
                    let Some(ch) = src[i..].chars().next() else {
                        return Err(err(start, "unterminated string"));
                    };
                    i += ch.len_utf8();
                    match ch {
                        '"' => break,
                        '\\' => {
                            let Some(e) = src[i..].chars().next() else {
                                return Err(err(start, "unterminated string"));
                            };
                            i += e.len_utf8();
                            match e {
                                '"' => s.push('"'),
                                '\\' => s.push('\\'),
                                'n' => s.push('\n'),
                                'u' => {
                                    let close = src[i..]
                                        .find('}')
                                        .ok_or_else(|| err(i, "bad \\u escape"))?;
                                    let hex = src[i..i + close].trim_start_matches('{');
                                    let v = u32::from_str_radix(hex, 16)
                                        .map_err(|_| err(i, "bad \\u escape"))?;
                                    s.push(
                                        char::from_u32(v)
                                            .ok_or_else(|| err(i, "bad \\u escape"))?,
                                    );
                                    i += close + 1;
                                }
                                _ => return Err(err(i, "unknown escape")),
                            }
                        }
                        ch => s.push(ch),
                    }
                }
                out.push(Token {
                    kind: Tok::Str(s),
                    offset: start,
                });
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => {
                out.push(Token {
                    kind: Tok::Arrow,
                    offset: start,
                });
                i += 2;
            }
            b'0'..=b'9' => {
                // Unsigned numbers; signs are punctuation handled by the parser.
                i += 1;
                if c == b'0' && bytes.get(i) == Some(&b'x') {
                    i += 1;
                    let s = i;
                    while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
                        i += 1;
                    }
                    let v = i128::from_str_radix(&src[s..i], 16)
                        .map_err(|_| err(start, "bad hex number"))?;
                    out.push(Token {
                        kind: Tok::Int(v),
                        offset: start,
                    });
                    continue;
                }
                while i < bytes.len() {
                    let b = bytes[i];
                    let exp_sign = matches!(b, b'-' | b'+') && matches!(bytes[i - 1], b'e' | b'E');
                    if b.is_ascii_digit() || b == b'.' || b == b'e' || b == b'E' || exp_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                let text = &src[start..i];
                if let Ok(v) = text.parse::<i128>() {
                    out.push(Token {
                        kind: Tok::Int(v),
                        offset: start,
                    });
                } else if text.parse::<f64>().is_ok() {
                    out.push(Token {
                        kind: Tok::Float(text.to_string()),
                        offset: start,
                    });
                } else {
                    return Err(err(start, &format!("bad number `{text}`")));
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'.'))
                {
                    i += 1;
                }
                let text = &src[start..i];
                let kind = match text {
                    "inf" | "nan" => Tok::Float(text.to_string()),
                    _ => Tok::Ident(text.to_string()),
                };
                out.push(Token {
                    kind,
                    offset: start,
                });
            }
            b'(' | b')' | b'[' | b']' | b'{' | b'}' | b',' | b'=' | b':' | b'*' | b'+' | b'-' => {
                out.push(Token {
                    kind: Tok::Punct(c as char),
                    offset: start,
                });
                i += 1;
            }
            _ => {
                return Err(err(
                    start,
                    &format!(
                        "unexpected character `{}`",
                        src[i..].chars().next().unwrap_or('?')
                    ),
                ))
            }
        }
    }
    out.push(Token {
        kind: Tok::Eof,
        offset: bytes.len(),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("1 -2 0.5 1e-05 -inf nan 0x1f"),
            vec![
                Tok::Int(1),
                Tok::Punct('-'),
                Tok::Int(2),
                Tok::Float("0.5".into()),
                Tok::Float("1e-05".into()),
                Tok::Punct('-'),
                Tok::Float("inf".into()),
                Tok::Float("nan".into()),
                Tok::Int(31),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn dims_and_values() {
        assert_eq!(
            kinds("[2*seq-1] %3.1#"),
            vec![
                Tok::Punct('['),
                Tok::Int(2),
                Tok::Punct('*'),
                Tok::Ident("seq".into()),
                Tok::Punct('-'),
                Tok::Int(1),
                Tok::Punct(']'),
                Tok::Value(3, 1),
                Tok::Comment(String::new()),
                Tok::Eof
            ]
        );
    }
}
