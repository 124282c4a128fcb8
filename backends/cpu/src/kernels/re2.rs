//! RE2's syntax on Rust's `regex` engine, for RegexFullMatch: ONNX
//! specifies RE2, whose Perl classes are ASCII (`\d` is `[0-9]`, `\w`
//! `[0-9A-Za-z_]`, `\s` `[\t\n\f\r ]`, `\b` an ASCII word boundary) where
//! Rust's are Unicode, and in whose character classes `[`, `&&` and `~~`
//! are literal where Rust nests classes and combines them. Patterns are
//! rewritten to the Rust form of the RE2 meaning; a pattern RE2 would
//! reject, such as one that closes the full-match group (`a)|(?:b`), is
//! refused, not matched differently.

/// The Rust `regex` pattern that means what `re2` means to RE2.
pub fn translate(re2: &str) -> String {
    let mut out = String::with_capacity(re2.len() + 16);
    let chars: Vec<char> = re2.chars().collect();
    let mut i = 0;
    // Inside a class: the position just after its `[` or `[^`.
    let mut class: Option<usize> = None;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&e) = chars.get(i + 1) else {
                out.push('\\');
                break;
            };
            let inside = class.is_some();
            // `\Q...\E`: everything between is literal (RE2; Rust has no
            // such quoting).
            if e == 'Q' {
                let body = i + 2;
                let end = (body..chars.len())
                    .find(|&k| chars[k] == '\\' && chars.get(k + 1) == Some(&'E'))
                    .unwrap_or(chars.len());
                for &q in &chars[body..end] {
                    out.push_str(&regex::escape(&q.to_string()));
                }
                i = (end + 2).min(chars.len());
                continue;
            }
            // Octal `\1`..`\377` (RE2: up to three digits; Rust reads
            // `\1` as a back-reference it refuses).
            if ('0'..='7').contains(&e) {
                let digits: String = chars[i + 1..]
                    .iter()
                    .take(3)
                    .take_while(|d| ('0'..='7').contains(*d))
                    .collect();
                let code = u32::from_str_radix(&digits, 8).unwrap_or(0);
                out.push_str(&format!("\\x{{{code:X}}}"));
                i += 1 + digits.len();
                continue;
            }
            match (e, inside) {
                ('d', false) => out.push_str("[0-9]"),
                ('d', true) => out.push_str("0-9"),
                ('D', _) => out.push_str("[^0-9]"),
                ('w', false) => out.push_str("[0-9A-Za-z_]"),
                ('w', true) => out.push_str("0-9A-Za-z_"),
                ('W', _) => out.push_str("[^0-9A-Za-z_]"),
                ('s', false) => out.push_str("[\\t\\n\\x0C\\r ]"),
                ('s', true) => out.push_str("\\t\\n\\x0C\\r "),
                ('S', _) => out.push_str("[^\\t\\n\\x0C\\r ]"),
                ('b', false) => out.push_str("(?-u:\\b)"),
                ('B', false) => out.push_str("(?-u:\\B)"),
                _ => {
                    out.push('\\');
                    out.push(e);
                }
            }
            i += 2;
            continue;
        }
        match class {
            None => {
                out.push(c);
                if c == '[' {
                    i += 1;
                    if chars.get(i) == Some(&'^') {
                        out.push('^');
                        i += 1;
                    }
                    class = Some(i);
                    // A `]` first in a class is literal in both syntaxes.
                    if chars.get(i) == Some(&']') {
                        out.push_str("\\]");
                        i += 1;
                    }
                    continue;
                }
            }
            Some(_) => match c {
                ']' => {
                    out.push(']');
                    class = None;
                }
                // POSIX classes (`[:alpha:]`) are the same in both.
                '[' if chars.get(i + 1) == Some(&':') => {
                    let end = (i + 2..chars.len().saturating_sub(1))
                        .find(|&k| chars[k] == ':' && chars[k + 1] == ']');
                    match end {
                        Some(k) => {
                            out.extend(&chars[i..k + 2]);
                            i = k + 2;
                            continue;
                        }
                        None => out.push_str("\\["),
                    }
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                // `--` is Rust's set difference; in RE2 the second `-` is
                // a literal (or a range's end).
                '-' if i > 0 && chars[i - 1] == '-' => out.push_str("\\-"),
                c => out.push(c),
            },
        }
        i += 1;
    }
    out
}

/// A compiled full-match pattern: the pattern must stand on its own (as
/// RE2 parses it) before it is anchored.
pub fn full_match(re2: &str) -> Result<regex::Regex, String> {
    let rust = translate(re2);
    regex::Regex::new(&rust).map_err(|e| e.to_string())?;
    regex::Regex::new(&format!("^(?:{rust})$")).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        full_match(p).unwrap().is_match(s)
    }

    #[test]
    fn perl_classes_are_ascii_as_in_re2() {
        assert!(m(r"\w+", "abc_09"));
        assert!(!m(r"\w+", "héllo"), "é is no RE2 word character");
        assert!(!m(r"\d", "٣"), "Arabic-Indic digits are no RE2 digits");
        assert!(m(r"\D", "٣"));
        assert!(m(r"[\w.]+@x", "a.b@x"));
        assert!(!m(r"[\w]+", "é"));
        assert!(m(r"a\sb", "a\tb"));
        assert!(!m(r"a\sb", "a\u{0B}b"), "RE2's \\s has no vertical tab");
        assert!(m(r"[[:alpha:]]+", "abc"));
        assert!(m(r"\bfoo\b.*", "foo bar"));
    }

    #[test]
    fn class_punctuation_is_literal_as_in_re2() {
        assert!(m(r"[[]", "["));
        assert!(m(r"[a&&b]+", "a&b"));
        assert!(m(r"[]a]+", "]a"));
    }

    #[test]
    fn quoting_octal_and_doubled_dashes_mean_what_re2_says() {
        assert!(m(r"\Qa.b\E", "a.b"));
        assert!(!m(r"\Qa.b\E", "axb"));
        assert!(m(r"\141b", "ab"));
        assert!(m(r"[a-z--]+", "a-b"));
        assert!(m(r"[+--]+", "+,-"));
    }

    #[test]
    fn a_pattern_cannot_escape_the_full_match() {
        assert!(full_match("a)|(?:b").is_err());
        assert!(!m("a|b", "ab"));
        assert!(m("a|b", "b"));
    }
}
