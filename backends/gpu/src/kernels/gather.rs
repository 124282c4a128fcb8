//! The `gather` kernel family: parameter structs shared by every GPU backend.
