//! String ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch and
//! TfIdfVectorizer (on strings or integers), and ImageDecoder (on encoded bytes)
//! (Equal on strings is in `elementwise`, LabelEncoder on strings in `ml`).

use rlx_ir::ops::{
    CaseChange, RegexFullMatch, StringConcat, StringNormalizer, StringSplit, TfIdfMode,
    TfIdfVectorizer,
};
use rlx_ir::Tensor;

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("StringNormalizer", 10, normalizer);
    r.add("StringConcat", 20, concat);
    r.add("StringSplit", 20, split);
    r.add("RegexFullMatch", 20, regex_full_match);
    r.add("TfIdfVectorizer", 9, tfidf_vectorizer);
    r.add("ImageDecoder", 20, image_decoder);
}

fn normalizer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let case_change = match cx
        .attr_choice("case_change_action", "NONE", &["LOWER", "UPPER", "NONE"])?
        .as_str()
    {
        "LOWER" => CaseChange::Lower,
        "UPPER" => CaseChange::Upper,
        _ => CaseChange::Keep,
    };
    let case_sensitive = cx.attr_bool("is_case_sensitive", false)?;
    let locale = cx.attr_s("locale")?.unwrap_or_default();
    // Case changes follow Unicode's default rules, the same in every locale
    // but Turkish and Lithuanian, whose special cases are not implemented.
    if ["tr", "az", "lt"].iter().any(|l| locale.starts_with(l)) {
        return cx.unsupported(format!("locale `{locale}` has case rules of its own"));
    }
    let stopwords = cx.attr_strings("stopwords")?.unwrap_or_default();
    let x = cx.req(0)?;
    let y = cx.add1(
        StringNormalizer {
            case_change,
            case_sensitive,
            stopwords,
            locale,
        },
        &[x],
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn concat(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (a, b) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(StringConcat {}, &[a, b])?;
    cx.set_output(0, y);
    Ok(())
}

fn split(cx: &mut NodeCtx) -> Result<(), MapError> {
    let delimiter = cx.attr_s("delimiter")?.unwrap_or_default();
    let maxsplit = cx.attr_i_opt("maxsplit")?;
    let x = cx.req(0)?;
    let ys = cx.add(
        StringSplit {
            delimiter,
            maxsplit,
        },
        &[x],
    )?;
    cx.set_outputs(&ys);
    Ok(())
}

fn regex_full_match(cx: &mut NodeCtx) -> Result<(), MapError> {
    let Some(pattern) = cx.attr_s("pattern")? else {
        return cx.unsupported("RegexFullMatch needs the attribute pattern");
    };
    let x = cx.req(0)?;
    let y = cx.add1(RegexFullMatch { pattern }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn tfidf_vectorizer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let required = |cx: &mut NodeCtx, name: &str| -> Result<i64, MapError> {
        cx.attr_i_opt(name)?.ok_or_else(|| MapError::Attr {
            name: name.into(),
            reason: "is required".into(),
        })
    };
    let min_gram = required(cx, "min_gram_length")?;
    let max_gram = required(cx, "max_gram_length")?;
    let max_skip = required(cx, "max_skip_count")?;
    let mode = match cx
        .attr_choice("mode", "", &["TF", "IDF", "TFIDF"])?
        .as_str()
    {
        "TF" => TfIdfMode::Tf,
        "IDF" => TfIdfMode::Idf,
        _ => TfIdfMode::TfIdf,
    };
    let ngram_counts = cx.attr_ints("ngram_counts")?.unwrap_or_default();
    let ngram_indexes = cx.attr_ints("ngram_indexes")?.unwrap_or_default();
    let pool = match (
        cx.attr_ints("pool_int64s")?,
        cx.attr_strings("pool_strings")?,
    ) {
        (Some(p), None) => Tensor::from_i64(&[p.len()], &p),
        (None, Some(p)) => Tensor::from_strings(&[p.len()], p),
        _ => {
            return cx
                .unsupported("TfIdfVectorizer needs exactly one of pool_int64s and pool_strings")
        }
    }
    .map_err(|e| MapError::Unsupported(e.to_string()))?;
    let weights = cx.attr_floats("weights")?.unwrap_or_default();
    let op = TfIdfVectorizer {
        mode,
        min_gram,
        max_gram,
        max_skip,
        ngram_counts,
        ngram_indexes,
        pool,
        weights,
    };
    if let Err(e) = op.validate() {
        return cx.unsupported(e);
    }
    let x = cx.req(0)?;
    let y = cx.add1(op, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn image_decoder(cx: &mut NodeCtx) -> Result<(), MapError> {
    use rlx_ir::ops::{ImageDecoder, PixelFormat};
    let pixel_format = match cx
        .attr_choice("pixel_format", "RGB", &["RGB", "BGR", "Grayscale"])?
        .as_str()
    {
        "BGR" => PixelFormat::Bgr,
        "Grayscale" => PixelFormat::Grayscale,
        _ => PixelFormat::Rgb,
    };
    let x = cx.req(0)?;
    let y = cx.add1(ImageDecoder { pixel_format }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}
