//! The `conv_transpose` kernel family: parameter structs shared by every GPU backend.
