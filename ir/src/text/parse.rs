//! The IR text parser. Accepts exactly what the printer writes (whitespace aside).

use std::collections::HashMap;

use super::attr::AttrValue;
use super::lex::{lex, Tok, Token};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::graph::{Graph, NodeId, Value};
use crate::ops::{Constant, Input, Op, Weight};
use crate::shape::{Shape, TensorType, ValueKind};
use crate::tensor::{Bytes, Tensor};

/// A syntax or consistency error, with its line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// A token cursor over IR text.
pub struct Parser<'s> {
    src: &'s str,
    toks: Vec<Token>,
    pos: usize,
    /// The named dims of the `dims { }` block, `$0` first.
    dims: Vec<Dim>,
    /// How deep subgraphs and dim expressions nest here.
    depth: usize,
}

/// Subgraphs and dim expressions nest at most this deep: a text is untrusted
/// (an artifact carries one), and recursion without a bound overflows the
/// stack.
pub const MAX_NESTING: usize = 100;

impl<'s> Parser<'s> {
    pub fn new(src: &'s str) -> Result<Parser<'s>, ParseError> {
        let toks = lex(src).map_err(|e| location(src, e.offset, e.message))?;
        Ok(Parser {
            src,
            toks,
            pos: 0,
            dims: Vec::new(),
            depth: 0,
        })
    }

    pub fn error_at(&self, offset: usize, message: String) -> ParseError {
        location(self.src, offset, message)
    }

    /// Where the next token starts, for errors about what follows.
    pub fn offset(&self) -> usize {
        self.peek_token().offset
    }

    fn error(&self, message: String) -> ParseError {
        self.error_at(self.peek_token().offset, message)
    }

    fn peek_token(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek(&self) -> &Tok {
        &self.peek_token().kind
    }

    fn bump(&mut self) -> Token {
        let t = self.peek_token().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn unexpected(&self, what: &str) -> ParseError {
        self.error(format!("expected {what}, found {}", self.peek()))
    }

    pub fn eat(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    pub fn expect(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{c}`")))
        }
    }

    pub fn eat_ident(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Tok::Ident(w) if w == word) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect_ident(&mut self, word: &str) -> Result<(), ParseError> {
        if self.eat_ident(word) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{word}`")))
        }
    }

    /// An identifier and its offset.
    pub fn ident(&mut self) -> Result<(usize, String), ParseError> {
        match self.peek().clone() {
            Tok::Ident(w) => Ok((self.bump().offset, w)),
            _ => Err(self.unexpected("a name")),
        }
    }

    pub fn string(&mut self) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Str(s) => {
                self.bump();
                Ok(s)
            }
            _ => Err(self.unexpected("a string")),
        }
    }

    pub fn int(&mut self) -> Result<i64, ParseError> {
        let neg = self.eat('-');
        match self.peek().clone() {
            Tok::Int(v) => {
                let off = self.bump().offset;
                let v = if neg { -v } else { v };
                i64::try_from(v).map_err(|_| self.error_at(off, format!("{v} does not fit in i64")))
            }
            _ => Err(self.unexpected("an integer")),
        }
    }

    fn raw_int(&mut self) -> Result<i128, ParseError> {
        let neg = self.eat('-');
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                Ok(if neg { -v } else { v })
            }
            _ => Err(self.unexpected("an integer")),
        }
    }

    pub fn bool(&mut self) -> Result<bool, ParseError> {
        if self.eat_ident("true") {
            Ok(true)
        } else if self.eat_ident("false") {
            Ok(false)
        } else {
            Err(self.unexpected("`true` or `false`"))
        }
    }

    /// A float literal's text (with its sign), for exact parsing into any width.
    pub fn float_text(&mut self) -> Result<(usize, String), ParseError> {
        let off = self.peek_token().offset;
        let neg = self.eat('-');
        let body = match self.peek().clone() {
            Tok::Int(v) => v.to_string(),
            Tok::Float(s) => s,
            _ => return Err(self.unexpected("a number")),
        };
        self.bump();
        Ok((off, if neg { format!("-{body}") } else { body }))
    }

    pub fn dtype(&mut self) -> Result<DType, ParseError> {
        let (off, w) = self.ident()?;
        w.parse()
            .map_err(|e: crate::dtype::UnknownDType| self.error_at(off, e.to_string()))
    }

    /// `[a, b, ...]` of items parsed by `item`.
    pub fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, ParseError>,
    ) -> Result<Vec<T>, ParseError> {
        self.expect('[')?;
        let mut v = Vec::new();
        if self.eat(']') {
            return Ok(v);
        }
        loop {
            v.push(item(self)?);
            if self.eat(']') {
                return Ok(v);
            }
            self.expect(',')?;
        }
    }

    /// A dim expression: sums of products of integers, symbols and
    /// `floordiv(a, b)`, `min(a, b)`, `max(a, b)`.
    pub fn dim(&mut self) -> Result<Dim, ParseError> {
        self.enter()?;
        let d = self.dim_sum();
        self.depth -= 1;
        d
    }

    fn dim_sum(&mut self) -> Result<Dim, ParseError> {
        let mut acc = self.dim_term()?;
        loop {
            if self.eat('+') {
                acc = acc.add(&self.dim_term()?);
            } else if *self.peek() == Tok::Punct('-') {
                self.bump();
                acc = acc.sub(&self.dim_term()?);
            } else {
                return Ok(acc);
            }
        }
    }

    fn dim_term(&mut self) -> Result<Dim, ParseError> {
        let mut acc = self.dim_factor()?;
        while self.eat('*') {
            let f = self.dim_factor()?;
            if !acc.product_fits(&f) {
                return Err(self.error(format!(
                    "a dim expression past {} terms or degree {}",
                    crate::dim::MAX_PRODUCT_TERMS,
                    crate::dim::MAX_DEGREE
                )));
            }
            acc = acc.mul(&f);
        }
        Ok(acc)
    }

    fn dim_factor(&mut self) -> Result<Dim, ParseError> {
        match self.peek().clone() {
            Tok::Punct('-') => {
                self.bump();
                self.enter()?;
                let d = self.dim_factor();
                self.depth -= 1;
                Ok(d?.neg())
            }
            Tok::Int(v) => {
                self.bump();
                i64::try_from(v)
                    .map(Dim::Known)
                    .map_err(|_| self.error(format!("{v} does not fit in i64")))
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Dim::sym(&s))
            }
            Tok::DimRef(k) => {
                self.bump();
                self.dims
                    .get(k as usize)
                    .cloned()
                    .ok_or_else(|| self.error(format!("`${k}` is not defined before its use")))
            }
            Tok::Punct('(') => {
                self.bump();
                let d = self.dim()?;
                self.expect(')')?;
                Ok(d)
            }
            Tok::Ident(w)
                if matches!(w.as_str(), "floordiv" | "min" | "max")
                    && self.toks.get(self.pos + 1).map(|t| &t.kind) == Some(&Tok::Punct('(')) =>
            {
                let off = self.bump().offset;
                self.expect('(')?;
                let a = self.dim()?;
                self.expect(',')?;
                let b = self.dim()?;
                self.expect(')')?;
                match w.as_str() {
                    "floordiv" => a
                        .floor_div(&b)
                        .map_err(|e| self.error_at(off, e.to_string())),
                    "min" => Ok(a.min_dim(&b)),
                    _ => Ok(a.max_dim(&b)),
                }
            }
            Tok::Ident(w) => {
                self.bump();
                Ok(Dim::sym(&w))
            }
            _ => Err(self.unexpected("a dim")),
        }
    }

    /// `[d0,d1,...]`.
    pub fn shape(&mut self) -> Result<Shape, ParseError> {
        self.list(|p| p.dim()).map(Shape)
    }

    /// `[opt] [seq] [map(KEY)] dtype[shape]`.
    pub fn tensor_type(&mut self) -> Result<TensorType, ParseError> {
        let off = self.peek_token().offset;
        let opt = self.eat_ident("opt");
        let seq = self.eat_ident("seq");
        let map = if self.eat_ident("map") {
            self.expect('(')?;
            let key = self.dtype()?;
            self.expect(')')?;
            Some(key)
        } else {
            None
        };
        let kind = match (opt, seq, map) {
            (false, false, None) => ValueKind::Tensor,
            (false, true, None) => ValueKind::Sequence,
            (true, false, None) => ValueKind::Optional,
            (true, true, None) => ValueKind::OptionalSequence,
            (false, false, Some(key)) => ValueKind::Map { key },
            (false, true, Some(key)) => ValueKind::MapSequence { key },
            (true, _, Some(_)) => {
                return Err(self.error_at(off, "an optional map is not supported".into()))
            }
        };
        let d = self.dtype()?;
        Ok(TensorType::new(d, self.shape()?).with_kind(kind))
    }

    /// `dtype[shape] [v0, v1, ...]` with a concrete shape.
    pub fn tensor(&mut self) -> Result<Tensor, ParseError> {
        let off = self.peek_token().offset;
        let ty = self.tensor_type()?;
        let dims = ty
            .shape
            .as_known()
            .ok_or_else(|| self.error_at(off, "a constant needs a concrete shape".into()))?;
        let d = ty.dtype;
        if ty.kind != ValueKind::Tensor {
            return Err(self.error_at(off, "a constant is a tensor".into()));
        }
        if d == DType::Str {
            let items = self.list(|p| p.string())?;
            return Tensor::from_strings(&dims, items)
                .map_err(|e| self.error_at(off, e.to_string()));
        }
        let mut bytes: Vec<u8> = Vec::new();
        let items = self.list(|p| element(p, d))?;
        for b in items {
            bytes.extend(b);
        }
        Tensor::new(d, dims, Bytes::copy_from(&bytes))
            .map_err(|e| self.error_at(off, e.to_string()))
    }

    /// `graph { ... }`.
    pub fn subgraph(&mut self) -> Result<Graph, ParseError> {
        self.expect_ident("graph")?;
        self.expect('{')?;
        self.enter()?;
        let g = self.body();
        self.depth -= 1;
        let g = g?;
        self.expect('}')?;
        Ok(g)
    }

    /// One level deeper, or an error past [`MAX_NESTING`].
    fn enter(&mut self) -> Result<(), ParseError> {
        if self.depth >= MAX_NESTING {
            return Err(self.error(format!("nested more than {MAX_NESTING} deep")));
        }
        self.depth += 1;
        Ok(())
    }

    /// Reads `name=value` (preceded by `,` unless first).
    pub fn attr<T: AttrValue>(&mut self, first: &mut bool, name: &str) -> Result<T, ParseError> {
        // An optional attribute (always last) the text left out: the block ends.
        if let Some(default) = T::absent() {
            let ends = if *first {
                !matches!(self.peek(), Tok::Ident(w) if w == name)
            } else {
                *self.peek() != Tok::Punct(',')
            };
            if ends {
                return Ok(default);
            }
        }
        if !*first {
            self.expect(',')?;
        }
        *first = false;
        self.expect_ident(name)?;
        self.expect('=')?;
        T::read_attr(self)
    }

    fn value_ref(&mut self, nums: &HashMap<u32, NodeId>, g: &Graph) -> Result<Value, ParseError> {
        match self.peek().clone() {
            Tok::Value(n, port) => {
                let off = self.bump().offset;
                let id = *nums.get(&n).ok_or_else(|| {
                    self.error_at(off, format!("%{n} is not defined before its use"))
                })?;
                let v = Value::new(id, port);
                g.check_value(v)
                    .map_err(|e| self.error_at(off, e.to_string()))?;
                Ok(v)
            }
            _ => Err(self.unexpected("a value like %3")),
        }
    }

    fn body(&mut self) -> Result<Graph, ParseError> {
        let mut g = Graph::new();
        let mut nums: HashMap<u32, NodeId> = HashMap::new();
        loop {
            match self.peek().clone() {
                Tok::Punct('}') => return Ok(g),
                Tok::Ident(w) if w == "output" => {
                    self.bump();
                    let name = self.string()?;
                    self.expect('=')?;
                    let v = self.value_ref(&nums, &g)?;
                    g.add_output(name, v)
                        .map_err(|e| self.error(e.to_string()))?;
                }
                Tok::Value(n, 0) => {
                    let off = self.bump().offset;
                    let count = if self.eat(':') {
                        self.int()? as usize
                    } else {
                        1
                    };
                    self.expect('=')?;
                    let (op, inputs) = self.op(&nums, &g)?;
                    self.expect(':')?;
                    let types = if self.eat('(') {
                        let mut v = vec![self.tensor_type()?];
                        while self.eat(',') {
                            v.push(self.tensor_type()?);
                        }
                        self.expect(')')?;
                        v
                    } else {
                        vec![self.tensor_type()?]
                    };
                    if types.len() != count {
                        return Err(self.error_at(
                            off,
                            format!(
                                "%{n} declares {count} outputs but lists {} types",
                                types.len()
                            ),
                        ));
                    }
                    let (name, origin) = match self.peek().clone() {
                        Tok::Comment(c) => {
                            self.bump();
                            parse_origin(&c).map_err(|m| self.error_at(off, m))?
                        }
                        _ => (None, Vec::new()),
                    };
                    let name = name.unwrap_or_else(|| match &op {
                        Op::Input(i) => i.name.clone(),
                        Op::Weight(w) => w.name.clone(),
                        _ => origin.first().cloned().unwrap_or_default(),
                    });
                    let is_input = matches!(op, Op::Input(_));
                    let node = crate::graph::Node::new(op, name, origin, types);
                    let id = if is_input {
                        g.add_input(node)
                    } else {
                        g.add_node(node, &inputs)
                            .map_err(|e| self.error_at(off, e.to_string()))?
                    };
                    if nums.insert(n, id).is_some() {
                        return Err(self.error_at(off, format!("%{n} is defined twice")));
                    }
                }
                _ => return Err(self.unexpected("a node, an output or `}`")),
            }
        }
    }

    fn op(
        &mut self,
        nums: &HashMap<u32, NodeId>,
        g: &Graph,
    ) -> Result<(Op, Vec<Value>), ParseError> {
        let (off, name) = self.ident()?;
        match name.as_str() {
            "input" => {
                return Ok((
                    Op::Input(Input {
                        name: self.string()?,
                    }),
                    Vec::new(),
                ))
            }
            "weight" => {
                return Ok((
                    Op::Weight(Weight {
                        name: self.string()?,
                    }),
                    Vec::new(),
                ))
            }
            "constant" => {
                return Ok((
                    Op::Constant(Constant {
                        value: self.tensor()?,
                    }),
                    Vec::new(),
                ))
            }
            _ => {}
        }
        self.expect('(')?;
        let mut inputs = Vec::new();
        if !self.eat(')') {
            loop {
                inputs.push(self.value_ref(nums, g)?);
                if self.eat(')') {
                    break;
                }
                self.expect(',')?;
            }
        }
        let op = Op::read(&name, self)
            .ok_or_else(|| self.error_at(off, format!("unknown op `{name}`")))??;
        Ok((op, inputs))
    }
}

/// One element of a constant, as little-endian bytes of `d`.
fn element(p: &mut Parser, d: DType) -> Result<Vec<u8>, ParseError> {
    Ok(match d {
        DType::F32 => f32_text(p)?.to_le_bytes().to_vec(),
        DType::F64 => {
            let (o, t) = p.float_text()?;
            t.parse::<f64>()
                .map_err(|_| p.error_at(o, format!("bad f64 `{t}`")))?
                .to_le_bytes()
                .to_vec()
        }
        DType::F16 => half::f16::from_f32(f32_text(p)?).to_le_bytes().to_vec(),
        DType::BF16 => half::bf16::from_f32(f32_text(p)?).to_le_bytes().to_vec(),
        DType::Bool => vec![u8::from(p.bool()?)],
        _ => {
            let v = p.raw_int()?;
            let bytes = v.to_le_bytes();
            bytes[..d.size()].to_vec()
        }
    })
}

fn f32_text(p: &mut Parser) -> Result<f32, ParseError> {
    let (o, t) = p.float_text()?;
    t.parse::<f32>()
        .map_err(|_| p.error_at(o, format!("bad f32 `{t}`")))
}

/// Parses `[name] origin1, "origin 2"` from a trailing comment.
fn parse_origin(c: &str) -> Result<(Option<String>, Vec<String>), String> {
    let mut rest = c.trim();
    let mut name = None;
    if let Some(r) = rest.strip_prefix('[') {
        let (n, after) = take_name(r, &[']'])?;
        let after = after
            .strip_prefix(']')
            .ok_or("unterminated `[name]` in comment")?;
        name = Some(n);
        rest = after.trim_start();
    }
    let mut origin = Vec::new();
    while !rest.is_empty() {
        let (n, after) = take_name(rest, &[','])?;
        origin.push(n);
        rest = after.trim_start();
        if let Some(a) = rest.strip_prefix(',') {
            rest = a.trim_start();
        }
    }
    Ok((name, origin))
}

/// A bare or quoted name at the start of `s`, and the rest.
fn take_name<'a>(s: &'a str, stops: &[char]) -> Result<(String, &'a str), String> {
    if let Some(q) = s.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = q.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((out, &q[i + 1..])),
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 'u')) => {
                        let body: String = chars
                            .by_ref()
                            .map(|(_, c)| c)
                            .take_while(|c| *c != '}')
                            .collect();
                        let v = u32::from_str_radix(body.trim_start_matches('{'), 16)
                            .map_err(|_| "bad escape")?;
                        out.push(char::from_u32(v).ok_or("bad escape")?);
                    }
                    Some((_, e)) => out.push(e),
                    None => return Err("unterminated name".into()),
                },
                c => out.push(c),
            }
        }
        Err("unterminated name".into())
    } else {
        let end = s
            .find(|c: char| stops.contains(&c) || c.is_whitespace())
            .unwrap_or(s.len());
        Ok((s[..end].to_string(), &s[end..]))
    }
}

fn location(src: &str, offset: usize, message: String) -> ParseError {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    ParseError {
        line,
        column,
        message,
    }
}

/// Parses a whole IR text (with its `rlx-ir N` header).
pub fn parse_graph(src: &str) -> Result<Graph, ParseError> {
    let mut p = Parser::new(src)?;
    p.expect_ident("rlx")?;
    p.expect('-')?;
    p.expect_ident("ir")?;
    let v = p.int()?;
    if !(2..=i64::from(super::TEXT_VERSION)).contains(&v) {
        return Err(p.error(format!(
            "IR text version {v} is not supported (this build reads 2 to {})",
            super::TEXT_VERSION
        )));
    }
    if v >= 3 && p.eat_ident("dims") {
        p.expect('{')?;
        while !p.eat('}') {
            let k = match p.peek().clone() {
                Tok::DimRef(k) => k,
                _ => return Err(p.unexpected("a named dim `$N` or `}`")),
            };
            if k as usize != p.dims.len() {
                return Err(p.error(format!(
                    "named dims are numbered in order: expected `${}`, found `${k}`",
                    p.dims.len()
                )));
            }
            p.bump();
            p.expect('=')?;
            let d = p.dim()?;
            p.dims.push(d);
        }
    }
    let g = p.subgraph()?;
    if *p.peek() != Tok::Eof {
        return Err(p.unexpected("end of input"));
    }
    Ok(g)
}
