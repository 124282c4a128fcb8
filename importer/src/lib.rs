//! importer
