//! rlx-passes
