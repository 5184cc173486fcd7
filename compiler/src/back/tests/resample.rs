//! Differential tests of `multilinear_upsample`, `roi_resample` and the ROI pools against
//! `ir::interp` (random seeded cases, one graph per batch), plus the out-of-range ROI data
//! the interpreter rejects but compiled code must survive (every access stays in bounds).

use super::harness::{Rng, load, opts};
use super::window::{Arg, Batch, Below};
use crate::ir::{Border, DType, Graph, Op, ResampleMethod, RoiPoolOp, Tensor, TensorType};

const METHODS: [ResampleMethod; 3] = [
    ResampleMethod::Symmetric,
    ResampleMethod::Asymmetric,
    ResampleMethod::Aligned,
];

#[test]
fn multilinear_upsample_random() {
    let mut r = Rng::new(7);
    let mut b = Batch::new();
    for method in METHODS {
        for border in [Border::Constant, Border::Replicate] {
            for spatial in 1..=3 {
                let mut shape = vec![1 + r.below(2), 1 + r.below(3)];
                let mut factor = Vec::new();
                for _ in 0..spatial {
                    shape.push(1 + r.below(5));
                    factor.push(1 + r.below(4));
                }
                let x = r.tensor(DType::F32, &shape, -2.0, 2.0);
                let op = Op::MultilinearUpsample {
                    factor: factor.clone(),
                    method,
                    border,
                };
                assert!(b.add(
                    format!("upsample {shape:?} x{factor:?} {method:?} {border:?}"),
                    op,
                    vec![Arg::In(x)],
                ));
            }
        }
    }
    // Factor 1 everywhere (a copy), size-1 spatial dims, a constant input.
    let x = r.tensor(DType::F32, &[1, 2, 1, 1], -1.0, 1.0);
    for factor in [vec![1, 1], vec![3, 1], vec![1, 2]] {
        b.add(
            format!("upsample 1x1 x{factor:?}"),
            Op::MultilinearUpsample {
                factor,
                method: ResampleMethod::Symmetric,
                border: Border::Constant,
            },
            vec![Arg::Const(x.clone())],
        );
    }
    b.check("ups");
}

/// ROI rows `(y1, x1, y2, x2)`: mostly inside the input, some partly or wholly outside,
/// some empty, some on quarter-pixel grids.
fn rois(r: &mut Rng, count: usize, h: usize, w: usize) -> Tensor {
    let mut v = Vec::new();
    for i in 0..count {
        let (hf, wf) = (h as f32, w as f32);
        let row = match i % 5 {
            0 => [0.0, 0.0, hf, wf],
            1 => {
                let y1 = r.f32(-2.0, hf);
                let x1 = r.f32(-2.0, wf);
                [y1, x1, y1 + r.f32(0.0, hf + 2.0), x1 + r.f32(0.0, wf + 2.0)]
            }
            2 => {
                let q = |r: &mut Rng, n: f32| (r.f32(0.0, n) * 4.0).floor() / 4.0;
                let y1 = q(r, hf);
                let x1 = q(r, wf);
                [y1, x1, y1 + 0.25 + q(r, hf), x1 + 0.25 + q(r, wf)]
            }
            3 => [1.0, 1.0, 1.0, 1.0 + r.f32(0.0, 3.0)],
            _ => [-5.0, hf + 1.0, -3.0, wf + 4.0],
        };
        v.extend(row);
    }
    Tensor::f32(vec![count, 4], v)
}

#[test]
fn roi_ops_random() {
    let mut r = Rng::new(11);
    let mut b = Batch::new();
    for case in 0..6 {
        let n = 1 + r.below(3);
        let c = 1 + r.below(3);
        let (h, w) = (1 + r.below(7), 1 + r.below(7));
        let count = 1 + r.below(6);
        let x = r.tensor(DType::F32, &[n, c, h, w], -2.0, 2.0);
        let ro = rois(&mut r, count, h, w);
        let bi = Tensor::i32(vec![count], (0..count).map(|_| r.below(n) as i32).collect());
        let out = vec![1 + r.below(4), 1 + r.below(4)];
        for op in [RoiPoolOp::Avg, RoiPoolOp::Max] {
            assert!(b.add(
                format!("{op:?} roi pool {case} {out:?}"),
                Op::RoiPool {
                    op,
                    output_size: out.clone()
                },
                vec![Arg::In(x.clone()), Arg::In(ro.clone()), Arg::In(bi.clone())],
            ));
        }
        let method = METHODS[case % 3];
        assert!(b.add(
            format!("roi_resample {case} {out:?} {method:?}"),
            Op::RoiResample {
                output_size: out.clone(),
                method
            },
            vec![
                Arg::In(x.clone()),
                Arg::In(ro.clone()),
                Arg::Const(bi.clone())
            ],
        ));
    }
    b.check("roi");
}

/// A whole-input ROI resampled to `n·f` equals `multilinear_upsample` with replicate.
#[test]
fn roi_resample_of_whole_input_is_upsample() {
    let mut r = Rng::new(3);
    let x = r.tensor(DType::F32, &[1, 2, 3, 4], -1.0, 1.0);
    let mut b = Batch::new();
    for method in METHODS {
        b.add(
            format!("roi {method:?}"),
            Op::RoiResample {
                output_size: vec![6, 8],
                method,
            },
            vec![
                Arg::In(x.clone()),
                Arg::In(Tensor::f32(vec![1, 4], vec![0.0, 0.0, 3.0, 4.0])),
                Arg::In(Tensor::i32(vec![1], vec![0])),
            ],
        );
    }
    b.check("roiw");
}

/// Data the interpreter rejects (batch index out of range, end before begin, NaN, huge
/// coordinates): the compiled code returns 0, stays in bounds, and writes finite values
/// where the data allows.
#[test]
fn roi_bad_data_stays_in_bounds() {
    let mut g = Graph::new("roibad");
    let x = g.add_input("x", TensorType::new(DType::F32, &[2, 3, 5, 4]));
    let ro = g.add_input("rois", TensorType::new(DType::F32, &[4, 4]));
    let bi = g.add_input("bi", TensorType::new(DType::I32, &[4]));
    for op in [
        Op::RoiPool {
            op: RoiPoolOp::Max,
            output_size: vec![2, 2],
        },
        Op::RoiPool {
            op: RoiPoolOp::Avg,
            output_size: vec![3, 2],
        },
        Op::RoiResample {
            output_size: vec![2, 3],
            method: ResampleMethod::Symmetric,
        },
    ] {
        let tys: Vec<_> = [x, ro, bi].iter().map(|v| g.ty(*v).clone()).collect();
        let refs: Vec<_> = tys.iter().collect();
        let out = crate::ir::infer::infer(&op, &refs).expect("infer");
        let y = g.add_node(op, vec![x, ro, bi], out);
        g.outputs.extend(y);
    }
    let m = load(&g, &opts("roibad"));
    let mut rng = Rng::new(5);
    let xt = rng.tensor(DType::F32, &[2, 3, 5, 4], -1.0, 1.0);
    let rows = Tensor::f32(
        vec![4, 4],
        vec![
            3.0,
            3.0,
            1.0,
            0.0, // end before begin
            f32::NAN,
            0.0,
            2.0,
            f32::INFINITY, // NaN and ∞
            -1e30,
            -1e30,
            1e30,
            1e30, // huge
            0.0,
            0.0,
            5.0,
            4.0, // fine, but batch index out of range
        ],
    );
    let bt = Tensor::i32(vec![4], vec![0, 1, -7, 99]);
    let inputs = [xt, rows, bt];
    assert!(crate::ir::interp::run(&g, &inputs).is_err());
    let got = m.run(&inputs).expect("status 0");
    assert_eq!(got.len(), 3);
    for t in &got {
        let v = match &t.data {
            crate::ir::TensorData::F32(v) => v,
            _ => panic!("dtype"),
        };
        // Rows 0, 2, 3 (no NaN in their data) give finite values.
        let per_roi = v.len() / 4;
        for roi in [0, 2, 3] {
            let part = &v[roi * per_roi..(roi + 1) * per_roi];
            assert!(part.iter().all(|x| x.is_finite()), "roi {roi}: {part:?}");
        }
    }
}

/// A border the back end has no code for is a typed error, not a panic.
#[test]
fn upsample_with_reflect_border_is_unsupported() {
    let mut g = Graph::new("u");
    let x = g.add_input("x", TensorType::new(DType::F32, &[1, 1, 4, 4]));
    let op = Op::MultilinearUpsample {
        factor: vec![2, 2],
        method: ResampleMethod::Symmetric,
        border: Border::Reflect,
    };
    let y = g.add_node(
        op,
        vec![x],
        vec![TensorType::new(DType::F32, &[1, 1, 8, 8])],
    );
    g.outputs.extend(y);
    let e = crate::back::compile(&g, &opts("u")).unwrap_err();
    assert!(
        matches!(&e, crate::back::CodegenError::Unsupported(m) if m.contains("multilinear_upsample")),
        "{e}"
    );
}

/// Upsample and ROI ops in an aarch64 object under qemu (the index-table and masked
/// paths on another ISA).
#[test]
fn resample_and_roi_on_aarch64_under_qemu() {
    if !super::window::aarch64_tools() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: aarch64 cross tools not installed (run .ci/setup)") + "\n")
                .as_bytes(),
        );
        return;
    }
    let mut r = Rng::new(13);
    let mut b = Batch::new();
    let x = r.tensor(DType::F32, &[2, 3, 5, 4], -1.0, 1.0);
    for method in METHODS {
        b.add(
            format!("upsample {method:?}"),
            Op::MultilinearUpsample {
                factor: vec![2, 3],
                method,
                border: Border::Constant,
            },
            vec![Arg::In(x.clone())],
        );
    }
    let ro = rois(&mut r, 5, 5, 4);
    let bi = Tensor::i32(vec![5], vec![1, 0, 1, 0, 1]);
    for op in [RoiPoolOp::Avg, RoiPoolOp::Max] {
        b.add(
            format!("{op:?} roi pool"),
            Op::RoiPool {
                op,
                output_size: vec![2, 3],
            },
            vec![Arg::In(x.clone()), Arg::In(ro.clone()), Arg::In(bi.clone())],
        );
    }
    b.add(
        "roi_resample".into(),
        Op::RoiResample {
            output_size: vec![3, 2],
            method: ResampleMethod::Aligned,
        },
        vec![Arg::In(x), Arg::In(ro), Arg::In(bi)],
    );
    super::window::check_on_aarch64(b, "xr");
}
