//! Per kernel family, what every GPU backend shares: the typed parameter
//! struct of each entry point (with the names of its operands, in launch
//! order) and the family's backend-independent planning (GEMM batching,
//! attention head geometry, pooling windows...). Each backend's lowering
//! fills these structs; each kernel language reads them by field name.

pub mod attention;
pub mod cast;
pub mod conv;
pub mod conv_transpose;
pub mod einsum;
pub mod elementwise;
pub mod gather;
pub mod indexing;
pub mod loss;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod one_hot;
pub mod pool;
pub mod quant;
pub mod reduce;
pub mod resize;
pub mod rotary;
pub mod scatter;
pub mod softmax;
pub mod tensor_scatter;
pub mod topk;
