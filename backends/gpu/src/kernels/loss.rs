//! The `loss` kernel family: parameter structs shared by every GPU backend.
