//! What a model says of itself: the `ModelProto` fields ONNX Runtime
//! returns from `get_modelmeta()`, and its `metadata_props` (class names,
//! image size, licence, ...), kept through compilation and in artifacts.

use crate::proto::{type_proto, ModelProto, ValueInfoProto};

/// One dim of a shape the model declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclaredDim {
    /// `dim_value`.
    Value(i64),
    /// `dim_param`.
    Param(String),
    /// Neither.
    Unknown,
}

/// The shape `vi` declares, if it declares a tensor shape.
fn declared_shape(vi: &ValueInfoProto) -> Option<Vec<DeclaredDim>> {
    use crate::proto::tensor_shape_proto::dimension::Value as DV;
    let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return None;
    };
    let dims = t.shape.as_ref()?.dim.iter().map(|d| match &d.value {
        Some(DV::DimValue(v)) => DeclaredDim::Value(*v),
        Some(DV::DimParam(p)) => DeclaredDim::Param(p.clone()),
        None => DeclaredDim::Unknown,
    });
    Some(dims.collect())
}

/// A model's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub producer_name: String,
    pub producer_version: String,
    pub domain: String,
    /// The model's `doc_string`.
    pub description: String,
    /// `model_version`, when the model has one.
    pub version: Option<i64>,
    pub graph_name: String,
    /// The main graph's `doc_string`.
    pub graph_description: String,
    /// `metadata_props`, in file order (ORT's `custom_metadata_map`).
    pub custom: Vec<(String, String)>,
    /// The shape each output declares (`None`: no tensor shape), by name,
    /// in graph order: what ONNX Runtime's `get_outputs()` reports, where
    /// rlx-onnx's own signature gives the shapes it infers.
    pub outputs: Vec<(String, Option<Vec<DeclaredDim>>)>,
}

impl Metadata {
    /// The metadata of a decoded model.
    pub fn of(m: &ModelProto) -> Metadata {
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        let graph = m.graph.as_ref();
        Metadata {
            producer_name: s(&m.producer_name),
            producer_version: s(&m.producer_version),
            domain: s(&m.domain),
            description: s(&m.doc_string),
            version: m.model_version,
            graph_name: graph.map(|g| s(&g.name)).unwrap_or_default(),
            graph_description: graph.map(|g| s(&g.doc_string)).unwrap_or_default(),
            custom: m
                .metadata_props
                .iter()
                .map(|p| (s(&p.key), s(&p.value)))
                .collect(),
            outputs: graph
                .map(|g| {
                    g.output
                        .iter()
                        .map(|vi| (s(&vi.name), declared_shape(vi)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The value of `metadata_props` key `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.custom
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The named fields, in a fixed order (the artifact stores them so).
    pub fn fields(&self) -> [(&'static str, &str); 6] {
        [
            ("producer_name", &self.producer_name),
            ("producer_version", &self.producer_version),
            ("domain", &self.domain),
            ("description", &self.description),
            ("graph_name", &self.graph_name),
            ("graph_description", &self.graph_description),
        ]
    }

    /// Sets the named field `name` (one of [`Metadata::fields`]); false
    /// for a name that is none of them.
    pub fn set_field(&mut self, name: &str, value: String) -> bool {
        let slot = match name {
            "producer_name" => &mut self.producer_name,
            "producer_version" => &mut self.producer_version,
            "domain" => &mut self.domain,
            "description" => &mut self.description,
            "graph_name" => &mut self.graph_name,
            "graph_description" => &mut self.graph_description,
            _ => return false,
        };
        *slot = value;
        true
    }
}
