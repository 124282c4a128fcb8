//! Dimensions: a known size or a symbolic expression over named symbols.
//!
//! A symbolic [`Dim`] is kept in a canonical form, a polynomial with integer
//! coefficients over *atoms* (symbols, floor divisions, minima and maxima), so that
//! structural equality is semantic equality for everything ONNX shape arithmetic
//! produces: `N*seq / seq == N`, `(2*s + 2) / 2 == s + 1`, `ceil(s/2) == floor((s+1)/2)`.
//! Symbols stand for non-negative integers.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

/// One dimension of a shape.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    /// A size known at compile time. Negative values only appear inside
    /// intermediate shape arithmetic, never in a valid tensor type.
    Known(i64),
    /// A symbolic expression; never a constant (those are `Known`).
    Expr(Arc<Poly>),
}

/// A polynomial: monomial -> non-zero coefficient. The empty monomial is the constant term.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Poly(BTreeMap<Monomial, i64>);

/// A product of atoms, sorted (repeated atoms are powers).
type Monomial = Vec<Atom>;

/// An indivisible symbolic quantity.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    Sym(Arc<str>),
    /// `floor(num / den)`, with `den` positive.
    FloorDiv(Dim, Dim),
    Min(Dim, Dim),
    Max(Dim, Dim),
}

/// The most terms [`Dim::mul`] expands a product into.
pub const MAX_PRODUCT_TERMS: usize = 4096;

/// The highest degree (atoms in one monomial) [`Dim::mul`] expands to.
pub const MAX_DEGREE: usize = 64;

/// Values for symbols, used by [`Dim::eval`] and specialization.
pub type Bindings = HashMap<String, i64>;

/// A symbolic computation that cannot be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DimError {
    #[error("division of `{0}` by zero")]
    DivByZero(String),
    #[error("symbol `{0}` has no value")]
    Unbound(String),
}

impl Dim {
    pub fn sym(name: &str) -> Dim {
        Dim::atom(Atom::Sym(Arc::from(name)))
    }

    fn atom(a: Atom) -> Dim {
        let mut p = BTreeMap::new();
        p.insert(vec![a], 1);
        Dim::from_poly(Poly(p))
    }

    fn from_poly(p: Poly) -> Dim {
        match p.0.len() {
            0 => Dim::Known(0),
            1 => match p.0.iter().next() {
                Some((m, c)) if m.is_empty() => Dim::Known(*c),
                _ => Dim::Expr(Arc::new(p)),
            },
            _ => Dim::Expr(Arc::new(p)),
        }
    }

    fn to_poly(&self) -> Poly {
        match self {
            Dim::Known(0) => Poly::default(),
            Dim::Known(c) => Poly(BTreeMap::from([(Vec::new(), *c)])),
            Dim::Expr(p) => (**p).clone(),
        }
    }

    /// The value if this dim is known.
    pub fn known(&self) -> Option<i64> {
        match self {
            Dim::Known(v) => Some(*v),
            Dim::Expr(_) => None,
        }
    }

    pub fn is_known(&self) -> bool {
        matches!(self, Dim::Known(_))
    }

    pub fn add(&self, other: &Dim) -> Dim {
        if let (Dim::Known(a), Dim::Known(b)) = (self, other) {
            return Dim::Known(a.wrapping_add(*b));
        }
        let mut p = self.to_poly();
        for (m, c) in other.to_poly().0 {
            add_term(&mut p, m, c);
        }
        Dim::from_poly(p)
    }

    pub fn neg(&self) -> Dim {
        self.scale(-1)
    }

    pub fn sub(&self, other: &Dim) -> Dim {
        self.add(&other.neg())
    }

    fn scale(&self, k: i64) -> Dim {
        match self {
            Dim::Known(a) => Dim::Known(a.wrapping_mul(k)),
            Dim::Expr(p) if k == 0 => {
                let _ = p;
                Dim::Known(0)
            }
            Dim::Expr(p) => Dim::from_poly(Poly(
                p.0.iter()
                    .map(|(m, c)| (m.clone(), c.wrapping_mul(k)))
                    .collect(),
            )),
        }
    }

    /// Whether `self * other` expands within [`MAX_PRODUCT_TERMS`] and
    /// [`MAX_DEGREE`].
    pub fn product_fits(&self, other: &Dim) -> bool {
        let (Dim::Expr(a), Dim::Expr(b)) = (self, other) else {
            return true;
        };
        let degree = |p: &Poly| p.0.keys().map(Vec::len).max().unwrap_or(0);
        a.0.len().saturating_mul(b.0.len()) <= MAX_PRODUCT_TERMS
            && degree(a) + degree(b) <= MAX_DEGREE
    }

    /// The product, expanded into a polynomial. A product that would pass
    /// [`MAX_PRODUCT_TERMS`] or [`MAX_DEGREE`] (only hostile models build
    /// one: each Mul of shape values can square the terms) is not expanded
    /// but named by the opaque symbol `_product_HASH`, which nothing binds:
    /// shape arithmetic stays bounded, and a run that needs its value is
    /// refused with the symbol named.
    pub fn mul(&self, other: &Dim) -> Dim {
        if !self.product_fits(other) {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (self, other).hash(&mut h);
            return Dim::sym(&format!("_product_{:016x}", h.finish()));
        }
        match (self, other) {
            (Dim::Known(a), Dim::Known(b)) => Dim::Known(a.wrapping_mul(*b)),
            (Dim::Known(k), d) | (d, Dim::Known(k)) => d.scale(*k),
            (Dim::Expr(a), Dim::Expr(b)) => {
                let mut p = Poly::default();
                for (ma, ca) in &a.0 {
                    for (mb, cb) in &b.0 {
                        let mut m: Monomial = ma.iter().chain(mb.iter()).cloned().collect();
                        m.sort();
                        add_term(&mut p, m, ca.wrapping_mul(*cb));
                    }
                }
                Dim::from_poly(p)
            }
        }
    }

    /// `floor(self / den)`.
    pub fn floor_div(&self, den: &Dim) -> Result<Dim, DimError> {
        match (self, den) {
            (_, Dim::Known(0)) => Err(DimError::DivByZero(self.to_string())),
            (Dim::Known(a), Dim::Known(b)) => Ok(Dim::Known(floor_div_i64(*a, *b))),
            (_, Dim::Known(1)) => Ok(self.clone()),
            (_, Dim::Known(k)) if *k > 0 => {
                // Split into terms divisible by k and a remainder.
                let mut q = Poly::default();
                let mut r = Poly::default();
                for (m, c) in self.to_poly().0 {
                    if m.is_empty() {
                        add_term(&mut q, m.clone(), c.div_euclid(*k));
                        add_term(&mut r, m, c.rem_euclid(*k));
                    } else if c % k == 0 {
                        add_term(&mut q, m, c / k);
                    } else {
                        add_term(&mut r, m, c);
                    }
                }
                let q = Dim::from_poly(q);
                // floor((floor(n / b) + c) / k) == floor((n + c*b) / (b*k))
                // for positive b and k: nested divisions flatten, so that a
                // chain of strided layers stays one short expression.
                if let Some((n, b, c)) = inner_floor_div(&r) {
                    if let Some(bk) = b.checked_mul(*k) {
                        let num = n.add(&Dim::Known(c * b));
                        return Ok(q.add(&num.floor_div(&Dim::Known(bk))?));
                    }
                }
                let r = Dim::from_poly(r);
                Ok(match r {
                    Dim::Known(rv) => q.add(&Dim::Known(rv.div_euclid(*k))),
                    r => q.add(&Dim::atom(Atom::FloorDiv(r, den.clone()))),
                })
            }
            _ => {
                if self == den {
                    return Ok(Dim::Known(1));
                }
                if let Some(q) = self.exact_div_monomial(den) {
                    return Ok(q);
                }
                Ok(Dim::atom(Atom::FloorDiv(self.clone(), den.clone())))
            }
        }
    }

    /// `self / den` when `den` is a single monomial that divides every term.
    fn exact_div_monomial(&self, den: &Dim) -> Option<Dim> {
        let dp = den.to_poly();
        if dp.0.len() != 1 {
            return None;
        }
        let (dm, dc) = dp.0.iter().next()?;
        let mut out = Poly::default();
        for (m, c) in self.to_poly().0 {
            if c % dc != 0 {
                return None;
            }
            let mut rest = m.clone();
            for a in dm {
                let pos = rest.iter().position(|x| x == a)?;
                rest.remove(pos);
            }
            add_term(&mut out, rest, c / dc);
        }
        Some(Dim::from_poly(out))
    }

    /// `ceil(self / den)` for a positive `den`.
    pub fn ceil_div(&self, den: &Dim) -> Result<Dim, DimError> {
        if let (Dim::Known(a), Dim::Known(b)) = (self, den) {
            if *b == 0 {
                return Err(DimError::DivByZero(self.to_string()));
            }
            return Ok(Dim::Known(-floor_div_i64(-a, *b)));
        }
        if self == den {
            return Ok(Dim::Known(1));
        }
        if let Some(q) = self.exact_div_monomial(den) {
            return Ok(q);
        }
        self.add(den).sub(&Dim::Known(1)).floor_div(den)
    }

    /// The atom this dim is, when it is one atom with coefficient 1.
    fn single_atom(&self) -> Option<&Atom> {
        let Dim::Expr(p) = self else {
            return None;
        };
        match p.0.iter().next() {
            Some((m, 1)) if p.0.len() == 1 && m.len() == 1 => m.first(),
            _ => None,
        }
    }

    pub fn min_dim(&self, other: &Dim) -> Dim {
        self.extremum(other, true)
    }

    pub fn max_dim(&self, other: &Dim) -> Dim {
        self.extremum(other, false)
    }

    fn extremum(&self, other: &Dim, min: bool) -> Dim {
        if self == other {
            return self.clone();
        }
        // Absorption: max(a, min(a, b)) = a and min(a, max(a, b)) = a; an
        // extremum of the same kind that holds `a` already is the answer:
        // max(a, max(a, b)) = max(a, b). Exact for every integer.
        for (x, y) in [(self, other), (other, self)] {
            if let Some(Atom::Min(p, q) | Atom::Max(p, q)) = y.single_atom() {
                if p == x || q == x {
                    let same_kind = matches!(y.single_atom(), Some(Atom::Min(..))) == min;
                    return if same_kind { y.clone() } else { x.clone() };
                }
            }
        }
        if let Dim::Known(d) = self.sub(other) {
            let self_smaller = d < 0;
            return if self_smaller == min {
                self.clone()
            } else {
                other.clone()
            };
        }
        let (a, b) = if self <= other {
            (self.clone(), other.clone())
        } else {
            (other.clone(), self.clone())
        };
        Dim::atom(if min {
            Atom::Min(a, b)
        } else {
            Atom::Max(a, b)
        })
    }

    /// The value of this dim under `bindings`.
    pub fn eval(&self, bindings: &Bindings) -> Result<i64, DimError> {
        match self.substitute(&|s| bindings.get(s).map(|v| Dim::Known(*v)))? {
            Dim::Known(v) => Ok(v),
            d => Err(DimError::Unbound(
                d.symbols().into_iter().next().unwrap_or_default(),
            )),
        }
    }

    /// Replaces symbols for which `f` gives a value, re-simplifying.
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<Dim>) -> Result<Dim, DimError> {
        let Dim::Expr(p) = self else {
            return Ok(self.clone());
        };
        let mut acc = Dim::Known(0);
        for (m, c) in &p.0 {
            let mut term = Dim::Known(*c);
            for a in m {
                term = term.mul(&a.substitute(f)?);
            }
            acc = acc.add(&term);
        }
        Ok(acc)
    }

    /// The symbols this dim mentions, sorted.
    pub fn symbols(&self) -> Vec<String> {
        let mut out = std::collections::BTreeSet::new();
        self.collect_symbols(&mut out);
        out.into_iter().collect()
    }

    fn collect_symbols(&self, out: &mut std::collections::BTreeSet<String>) {
        if let Dim::Expr(p) = self {
            for m in p.0.keys() {
                for a in m {
                    match a {
                        Atom::Sym(s) => {
                            out.insert(s.to_string());
                        }
                        Atom::FloorDiv(x, y) | Atom::Min(x, y) | Atom::Max(x, y) => {
                            x.collect_symbols(out);
                            y.collect_symbols(out);
                        }
                    }
                }
            }
        }
    }

    /// If this dim is exactly one symbol, its name.
    pub fn as_symbol(&self) -> Option<&str> {
        let Dim::Expr(p) = self else { return None };
        match p.0.iter().next() {
            Some((m, 1)) if p.0.len() == 1 && m.len() == 1 => match &m[0] {
                Atom::Sym(s) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }
}

impl Atom {
    fn substitute(&self, f: &dyn Fn(&str) -> Option<Dim>) -> Result<Dim, DimError> {
        Ok(match self {
            Atom::Sym(s) => f(s).unwrap_or_else(|| Dim::atom(self.clone())),
            Atom::FloorDiv(a, b) => a.substitute(f)?.floor_div(&b.substitute(f)?)?,
            Atom::Min(a, b) => a.substitute(f)?.min_dim(&b.substitute(f)?),
            Atom::Max(a, b) => a.substitute(f)?.max_dim(&b.substitute(f)?),
        })
    }
}

/// `(n, b, c)` when `p` is `floor(n / b) + c` with a known positive `b`
/// (both small enough that `c * b` cannot overflow).
fn inner_floor_div(p: &Poly) -> Option<(Dim, i64, i64)> {
    let mut atom = None;
    let mut c = 0;
    for (m, &coef) in &p.0 {
        match m.as_slice() {
            [] => c = coef,
            [Atom::FloorDiv(n, Dim::Known(b))] if coef == 1 && *b > 0 => atom = Some((n, *b)),
            _ => return None,
        }
    }
    let (n, b) = atom?;
    (b < 1 << 20 && c.unsigned_abs() < 1 << 20).then(|| (n.clone(), b, c))
}

/// `floor(a / b)` for any signs, `b != 0`.
pub fn floor_div_i64(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn add_term(p: &mut Poly, m: Monomial, c: i64) {
    if c == 0 {
        return;
    }
    let e = p.0.entry(m).or_insert(0);
    *e = e.wrapping_add(c);
    if *e == 0 {
        p.0.retain(|_, v| *v != 0);
    }
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::Known(v)
    }
}

impl From<usize> for Dim {
    fn from(v: usize) -> Dim {
        Dim::Known(v as i64)
    }
}

/// True if `s` can be printed bare as a symbol name.
pub fn is_bare_symbol(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(s, "floordiv" | "min" | "max")
}

/// Writes `s` as a quoted string with escapes.
pub fn write_quoted(f: &mut impl fmt::Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{{{:x}}}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

impl Atom {
    /// This atom's text, with `dim` rendering the dims inside it.
    pub fn render(&self, dim: &mut dyn FnMut(&Dim) -> String) -> String {
        match self {
            Atom::Sym(s) => {
                let mut out = String::new();
                let _ = if is_bare_symbol(s) {
                    fmt::Write::write_str(&mut out, s)
                } else {
                    write_quoted(&mut out, s)
                };
                out
            }
            Atom::FloorDiv(a, b) => format!("floordiv({}, {})", dim(a), dim(b)),
            Atom::Min(a, b) => format!("min({}, {})", dim(a), dim(b)),
            Atom::Max(a, b) => format!("max({}, {})", dim(a), dim(b)),
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&mut |d| d.to_string()))
    }
}

impl Dim {
    /// Writes this dim in its canonical text, with `atom` rendering each
    /// atom (the IR printer names long ones).
    pub fn write_atoms(
        &self,
        f: &mut dyn fmt::Write,
        atom: &mut dyn FnMut(&Atom) -> String,
    ) -> fmt::Result {
        let p = match self {
            Dim::Known(v) => return write!(f, "{v}"),
            Dim::Expr(p) => p,
        };
        // Higher-degree terms first (canonical order within a degree), then the constant.
        let mut terms: Vec<_> = p.0.iter().filter(|(m, _)| !m.is_empty()).collect();
        terms.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(b.0)));
        let terms = terms
            .into_iter()
            .chain(p.0.iter().filter(|(m, _)| m.is_empty()));
        for (i, (m, c)) in terms.enumerate() {
            let (sign, mag) = if *c < 0 {
                ("-", c.unsigned_abs())
            } else {
                ("+", *c as u64)
            };
            if i > 0 || sign == "-" {
                f.write_str(sign)?;
            }
            if m.is_empty() {
                write!(f, "{mag}")?;
                continue;
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            for (j, a) in m.iter().enumerate() {
                if j > 0 {
                    f.write_str("*")?;
                }
                f.write_str(&atom(a))?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_atoms(f, &mut |a| a.to_string())
    }
}

impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {

    /// Squaring `a + b` doubles the degree and squares the terms: a chain
    /// of Mul nodes on shape values must not expand without bound.
    #[test]
    fn products_past_the_bounds_stay_opaque() {
        let mut d = Dim::sym("a").add(&Dim::sym("b"));
        for _ in 0..40 {
            d = d.mul(&d);
        }
        assert!(d.to_string().starts_with("_product_"), "{d}");
        let again = {
            let mut d = Dim::sym("a").add(&Dim::sym("b"));
            for _ in 0..40 {
                d = d.mul(&d);
            }
            d
        };
        assert_eq!(d, again, "the opaque name is deterministic");
        let small = Dim::sym("a").add(&Dim::sym("b"));
        assert_eq!(small.mul(&small).to_string().matches('+').count(), 2);
    }
    use super::*;

    fn s(n: &str) -> Dim {
        Dim::sym(n)
    }
    fn k(v: i64) -> Dim {
        Dim::Known(v)
    }

    #[test]
    fn polynomial_canonical_form() {
        let n = s("N");
        let seq = s("seq");
        assert_eq!(n.mul(&seq), seq.mul(&n));
        assert_eq!(n.add(&seq).sub(&n), seq);
        assert_eq!(seq.mul(&k(2)).sub(&k(1)).to_string(), "2*seq-1");
        assert_eq!(n.mul(&seq).to_string(), "N*seq");
        assert_eq!(n.sub(&n), k(0));
    }

    #[test]
    fn division() {
        let n = s("N");
        let seq = s("seq");
        assert_eq!(n.mul(&seq).floor_div(&seq).unwrap(), n);
        assert_eq!(n.mul(&k(12)).floor_div(&k(4)).unwrap(), n.mul(&k(3)));
        assert_eq!(
            seq.mul(&k(2)).add(&k(2)).floor_div(&k(2)).unwrap(),
            seq.add(&k(1))
        );
        assert_eq!(
            seq.ceil_div(&k(2)).unwrap(),
            seq.add(&k(1)).floor_div(&k(2)).unwrap()
        );
        assert_eq!(
            seq.ceil_div(&k(2)).unwrap().to_string(),
            "floordiv(seq+1, 2)"
        );
        assert_eq!(k(7).floor_div(&k(2)).unwrap(), k(3));
        assert_eq!(k(7).ceil_div(&k(2)).unwrap(), k(4));
        assert!(n.floor_div(&k(0)).is_err());
    }

    #[test]
    fn nested_divisions_flatten_and_keep_their_value() {
        // Five stride-2 layers: ceil(ceil(ceil(ceil(ceil(h/2)/2)/2)/2)/2).
        let mut d = s("h");
        for _ in 0..5 {
            d = d.ceil_div(&k(2)).unwrap();
        }
        assert_eq!(d.to_string(), "floordiv(h+31, 32)");
        // floor((floor((h+1)/3) + 2)/4) - 1, against direct arithmetic.
        let e = s("h")
            .add(&k(1))
            .floor_div(&k(3))
            .unwrap()
            .add(&k(2))
            .floor_div(&k(4))
            .unwrap()
            .sub(&k(1));
        for h in 0..200 {
            let b: Bindings = [("h".to_string(), h)].into();
            let want = floor_div_i64(floor_div_i64(h + 1, 3) + 2, 4) - 1;
            assert_eq!(e.eval(&b).unwrap(), want, "h = {h}");
            let want = (0..5).fold(h, |x, _| -floor_div_i64(-x, 2));
            assert_eq!(d.eval(&b).unwrap(), want, "h = {h}");
        }
    }

    #[test]
    fn extrema_absorb_what_they_bound() {
        let (s, t) = (s("seq"), s("t"));
        let m = k(512).min_dim(&s);
        assert_eq!(s.max_dim(&m), s, "max(s, min(512, s)) = s");
        assert_eq!(m.max_dim(&s), s);
        let x = k(512).max_dim(&s);
        assert_eq!(s.min_dim(&x), s, "min(s, max(512, s)) = s");
        let st = s.max_dim(&t);
        assert_eq!(s.max_dim(&st), st, "max(s, max(s, t)) = max(s, t)");
        let mut nested = s.min_dim(&k(512));
        for _ in 0..10 {
            nested = s.max_dim(&s.max_dim(&nested));
        }
        assert_eq!(nested, s);
        // The value is kept wherever the rules apply.
        for v in [0, 100, 512, 700] {
            let b: Bindings = [("seq".to_string(), v), ("t".to_string(), 300)].into();
            assert_eq!(s.max_dim(&st).eval(&b).unwrap(), v.max(300));
            assert_eq!(s.max_dim(&m).eval(&b).unwrap(), v);
        }
    }

    #[test]
    fn min_max_and_eval() {
        let n = s("N");
        assert_eq!(n.min_dim(&n.add(&k(1))), n);
        assert_eq!(n.max_dim(&n.add(&k(1))), n.add(&k(1)));
        let m = n.min_dim(&s("M"));
        assert_eq!(m, s("M").min_dim(&n));
        let b: Bindings = [("N".to_string(), 5), ("M".to_string(), 3)].into();
        assert_eq!(m.eval(&b).unwrap(), 3);
        assert_eq!(n.ceil_div(&k(2)).unwrap().eval(&b).unwrap(), 3);
        assert!(s("Z").eval(&b).is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(s("batch size").to_string(), "\"batch size\"");
        assert_eq!(s("min").to_string(), "\"min\"");
    }
}
