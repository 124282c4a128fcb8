//! The row GEMV ([`crate::kernels::row_gemv`]): which products take it, and
//! its results against cuBLASLt's (and the tile kernel's) on the device.

use crate::nn_tests::{names, run_on_device};
use crate::tests::planned_with;
use crate::{FewRows, PlanOptions};

fn few_rows(f: FewRows) -> PlanOptions {
    PlanOptions {
        few_rows: f,
        ..PlanOptions::default()
    }
}

/// Products of a few rows: one row with a bias and an erf-GELU (16-byte
/// lanes, k split over blocks); eight rows of a deep product
/// against 33 columns (one column a lane: n is no multiple of four) with
/// a bias and ReLU; three rows with no bias (the eight-row kernel with
/// rows to spare); a bias along M (the epilogue kernel after); and two
/// products that stay with the libraries (nine rows; k below 64); and two
/// rows against a wide matrix (8193 columns, one a lane), whose column
/// tiles are wide (32 lanes a row of k) where the others' are narrow.
const FEW_ROWS: &str = "  %0 = input \"x\" : f32[1,1,96]
  %1 = input \"w\" : f32[96,512]
  %2 = input \"b\" : f32[512]
  %3 = fused_matmul(%0, %1, %2) {activation=gelu_erf} : f32[1,1,512]
  %4 = input \"y\" : f32[8,3000]
  %5 = input \"v\" : f32[3000,33]
  %6 = input \"vb\" : f32[33]
  %7 = fused_matmul(%4, %5, %6) {activation=relu} : f32[8,33]
  %8 = input \"z\" : f32[3,200]
  %9 = input \"u\" : f32[200,1000]
  %10 = matmul(%8, %9) : f32[3,1000]
  %11 = input \"bm\" : f32[3,1]
  %12 = fused_matmul(%8, %9, %11) {activation=sigmoid} : f32[3,1000]
  %13 = input \"t\" : f32[9,200]
  %14 = matmul(%13, %9) : f32[9,1000]
  %15 = input \"s\" : f32[2,32]
  %16 = input \"r\" : f32[32,64]
  %17 = matmul(%15, %16) : f32[2,64]
  %18 = input \"q\" : f32[2,1024]
  %19 = input \"p\" : f32[1024,8193]
  %20 = matmul(%18, %19) : f32[2,8193]
  output \"a\" = %3
  output \"b\" = %7
  output \"c\" = %10
  output \"d\" = %12
  output \"e\" = %14
  output \"f\" = %17
  output \"g\" = %20
";

#[test]
fn products_of_few_rows_run_in_the_row_gemv() {
    let entries = names(&planned_with(FEW_ROWS, &few_rows(FewRows::All)));
    let count = |e: &str| entries.iter().filter(|x| *x == e).count();
    // Narrow column tiles (8 lanes a row of k) where wide ones would leave
    // the grid fewer blocks (512 and 33 columns); wide ones where narrow
    // ones give no more (1000 columns of a shallow product) and for the
    // wide matrix.
    assert_eq!(count("row_gemv_f32_v4_r1_l8"), 1, "{entries:?}");
    assert_eq!(count("row_gemv_f32_v1_r8_l8"), 1, "{entries:?}");
    assert_eq!(count("row_gemv_f32_v4_r8_l32"), 2, "{entries:?}");
    assert_eq!(count("row_gemv_f32_v1_r8_l32"), 1, "{entries:?}");
    // One launch a product: the blocks that split k merge their sums.
    assert!(!entries.iter().any(|e| e.contains("merge")), "{entries:?}");
    // The bias along M: the epilogue kernel, with the sigmoid.
    assert_eq!(entries.iter().filter(|e| e.contains("epilogue")).count(), 1);
    // Nine rows and the shallow product: cuBLASLt and the tile kernel.
    assert_eq!(count("gemm"), 1, "{entries:?}");
    assert_eq!(count("tile_gemm_f32"), 1, "{entries:?}");
    let library = names(&planned_with(FEW_ROWS, &few_rows(FewRows::Library)));
    assert!(
        !library.iter().any(|e| e.starts_with("row_gemv")),
        "{library:?}"
    );
    // The default leaves the one-row product to the libraries.
    let batched = names(&planned_with(FEW_ROWS, &PlanOptions::default()));
    assert!(!batched.iter().any(|e| e.ends_with("_r1")), "{batched:?}");
    assert!(
        batched.iter().any(|e| e == "row_gemv_f32_v1_r8_l8"),
        "{batched:?}"
    );
    // Half types take their own entries, with 8-element lanes.
    let half = FEW_ROWS.replace("f32", "f16");
    let entries = names(&planned_with(&half, &few_rows(FewRows::All)));
    assert!(
        entries.contains(&"row_gemv_f16_v8_r1_l8".to_string()),
        "{entries:?}"
    );
}

#[test]
fn row_gemvs_match_the_libraries_on_the_device() {
    let ctx = match crate::Context::new() {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    let want = run_on_device(&ctx, FEW_ROWS, &few_rows(FewRows::Library));
    let got = run_on_device(&ctx, FEW_ROWS, &few_rows(FewRows::All));
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
        assert_eq!(a.len(), b.len());
        // Sums in another order: within 1e-5 of the output's largest magnitude.
        let scale = b.iter().fold(1f32, |m, v| m.max(v.abs()));
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * scale,
                "output {o} [{i}]: row GEMV {x} vs library {y} (scale {scale})"
            );
        }
    }
}
