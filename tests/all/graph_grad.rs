//! Every gradient rule of `nnefc::graph::grad` against finite differences, through the
//! compiled code: each case builds `loss = Σ op(params)·R` (R fixed, random) with the
//! gradients as extra outputs, compiles it once, and compares each analytic derivative with
//! the central difference of the loss at ±h. Plus the training example with a fixed seed:
//! its loss must fall.

use nnefc::compiler::ir::{DType, Tensor, TensorData};
use nnefc::graph::{Arg, Graph, Value, grad, ops};

/// A tiny deterministic generator (no test dependency on a random crate).
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }
    /// Uniform in [-1, 1).
    pub fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn f32s(t: &Tensor) -> &[f32] {
    match &t.data {
        TensorData::F32(x) => x,
        _ => panic!("not f32"),
    }
}

/// How to draw a parameter's values.
#[derive(Clone, Copy)]
enum Draw {
    /// Uniform in [-1, 1), away from 0 by 0.1 (kinks of relu, abs, max).
    Signed,
    /// In [0.5, 1.5) (log, sqrt, pow, division).
    Positive,
    /// Distinct values at least 0.05 apart, shuffled (max: no tie within ±h).
    Distinct,
}

struct Case {
    name: &'static str,
    shapes: Vec<Vec<usize>>,
    draw: Draw,
    build: Box<dyn Fn(&[Value]) -> Value>,
}

fn case(
    name: &'static str,
    shapes: &[&[usize]],
    draw: Draw,
    build: impl Fn(&[Value]) -> Value + 'static,
) -> Case {
    Case {
        name,
        shapes: shapes.iter().map(|s| s.to_vec()).collect(),
        draw,
        build: Box::new(build),
    }
}

fn pads(p: i64, n: usize) -> Vec<(i64, i64)> {
    vec![(p, p); n]
}

fn cases() -> Vec<Case> {
    use Draw::*;
    let s23: &[usize] = &[2, 3];
    let mut v = vec![
        case("copy", &[s23], Signed, |p| ops::copy(&p[0]).unwrap()),
        case("neg", &[s23], Signed, |p| ops::neg(&p[0]).unwrap()),
        case("exp", &[s23], Signed, |p| ops::exp(&p[0]).unwrap()),
        case("log", &[s23], Positive, |p| ops::log(&p[0]).unwrap()),
        case("sqr", &[s23], Signed, |p| ops::sqr(&p[0]).unwrap()),
        case("sqrt", &[s23], Positive, |p| ops::sqrt(&p[0]).unwrap()),
        case("abs", &[s23], Signed, |p| ops::abs(&p[0]).unwrap()),
        case("relu", &[s23], Signed, |p| ops::relu(&p[0]).unwrap()),
        case("sigmoid", &[s23], Signed, |p| ops::sigmoid(&p[0]).unwrap()),
        case("tanh", &[s23], Signed, |p| ops::tanh(&p[0]).unwrap()),
        case("leaky_relu", &[s23], Signed, |p| {
            ops::leaky_relu(&p[0], 0.2).unwrap()
        }),
        case("elu", &[s23], Signed, |p| {
            ops::elu(&p[0], ops::EluAttrs::default()).unwrap()
        }),
        case("softplus", &[s23], Signed, |p| {
            ops::softplus(&p[0]).unwrap()
        }),
        case("add (broadcast)", &[s23, &[2, 1]], Signed, |p| {
            ops::add(&p[0], &p[1]).unwrap()
        }),
        case("sub (broadcast)", &[&[2, 1], s23], Signed, |p| {
            ops::sub(&p[0], &p[1]).unwrap()
        }),
        case("mul (broadcast, lower rank)", &[s23, &[2]], Signed, |p| {
            ops::mul(&p[0], &p[1]).unwrap()
        }),
        case("div", &[s23, s23], Positive, |p| {
            ops::div(&p[0], &p[1]).unwrap()
        }),
        case("div by a literal", &[s23], Signed, |p| {
            ops::div(&p[0], 3.0_f32).unwrap()
        }),
        case("pow", &[s23, s23], Positive, |p| {
            ops::pow(&p[0], &p[1]).unwrap()
        }),
        case("min", &[s23, s23], Distinct, |p| {
            ops::min(&p[0], &p[1]).unwrap()
        }),
        case("max", &[s23, s23], Distinct, |p| {
            ops::max(&p[0], &p[1]).unwrap()
        }),
        case("clamp", &[s23], Signed, |p| {
            ops::clamp(&p[0], -0.5_f32, 0.5_f32).unwrap()
        }),
        case("select", &[s23, s23], Signed, |p| {
            let c = ops::gt(&p[0], 0.0_f32).unwrap();
            ops::select(c, &p[0], &p[1]).unwrap()
        }),
        case("softmax", &[&[2, 4]], Signed, |p| {
            ops::softmax(&p[0], ops::SoftmaxAttrs { axes: vec![1] }).unwrap()
        }),
        case("reshape", &[&[2, 6]], Signed, |p| {
            ops::reshape(&p[0], vec![3, 4], ops::ReshapeAttrs::default()).unwrap()
        }),
        case("squeeze", &[&[2, 1, 3]], Signed, |p| {
            ops::squeeze(&p[0], vec![1]).unwrap()
        }),
        case("unsqueeze", &[s23], Signed, |p| {
            ops::unsqueeze(&p[0], vec![0]).unwrap()
        }),
        case("transpose", &[&[2, 3, 4]], Signed, |p| {
            ops::transpose(&p[0], vec![2, 0, 1]).unwrap()
        }),
        case("concat", &[s23, &[2, 2]], Signed, |p| {
            ops::concat(&[p[0].clone(), p[1].clone()], 1).unwrap()
        }),
        case("split", &[&[2, 6]], Signed, |p| {
            let parts = ops::split(&p[0], 1, vec![1, 2]).unwrap();
            ops::mul(&parts[1], 2.0_f32).unwrap()
        }),
        case("slice", &[&[3, 5]], Signed, |p| {
            ops::slice(
                &p[0],
                vec![0, 1],
                vec![1, -4],
                vec![3, -1],
                ops::SliceAttrs::default(),
            )
            .unwrap()
        }),
        case("sum_reduce", &[&[2, 3, 4]], Signed, |p| {
            ops::sum_reduce(&p[0], vec![1, 2], ops::SumReduceAttrs::default()).unwrap()
        }),
        case("mean_reduce", &[&[2, 3, 4]], Signed, |p| {
            ops::mean_reduce(&p[0], vec![0, 2]).unwrap()
        }),
        case("tile", &[s23], Signed, |p| {
            ops::tile(&p[0], vec![2, 3]).unwrap()
        }),
        case("pad", &[s23], Signed, |p| {
            ops::pad(&p[0], vec![(1, 0), (2, 1)], ops::PadAttrs::default()).unwrap()
        }),
        case("max_reduce", &[&[2, 5]], Distinct, |p| {
            ops::max_reduce(&p[0], vec![1]).unwrap()
        }),
    ];
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let name: &'static str = match (ta, tb) {
            (false, false) => "matmul",
            (true, false) => "matmul Aᵀ",
            (false, true) => "matmul Bᵀ",
            (true, true) => "matmul AᵀBᵀ",
        };
        let a: &'static [usize] = if ta { &[4, 2] } else { &[2, 4] };
        let b: &'static [usize] = if tb { &[3, 4] } else { &[4, 3] };
        v.push(case(name, &[a, b], Signed, move |p| {
            ops::matmul(
                &p[0],
                &p[1],
                ops::MatmulAttrs {
                    transpose_a: ta,
                    transpose_b: tb,
                },
            )
            .unwrap()
        }));
    }
    v.push(case("linear", &[&[2, 5], &[3, 5], &[1, 3]], Signed, |p| {
        ops::linear(
            &p[0],
            &p[1],
            ops::LinearAttrs {
                bias: Some(Arg::from(&p[2])),
            },
        )
        .unwrap()
    }));
    v.push(case(
        "conv 3×3 pad 1",
        &[&[1, 2, 5, 5], &[3, 2, 3, 3], &[1, 3]],
        Signed,
        |p| {
            ops::conv(
                &p[0],
                &p[1],
                ops::ConvAttrs {
                    bias: Some(Arg::from(&p[2])),
                    padding: pads(1, 2),
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "conv 3×3 stride 2 auto padding",
        &[&[2, 2, 6, 5], &[2, 2, 3, 3]],
        Signed,
        |p| {
            ops::conv(
                &p[0],
                &p[1],
                ops::ConvAttrs {
                    stride: vec![2, 2],
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "conv 2×2 dilation 2",
        &[&[1, 1, 6, 6], &[2, 1, 2, 2]],
        Signed,
        |p| {
            ops::conv(
                &p[0],
                &p[1],
                ops::ConvAttrs {
                    dilation: vec![2, 2],
                    padding: pads(0, 2),
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "conv grouped 2 (2→3 channels per group), batch 2, stride 2",
        &[&[2, 4, 5, 5], &[6, 2, 3, 3]],
        Signed,
        |p| {
            ops::conv(
                &p[0],
                &p[1],
                ops::ConvAttrs {
                    groups: 2,
                    padding: pads(1, 2),
                    stride: vec![2, 2],
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "conv depthwise ×2 multiplier, dilation 2, batch 2",
        &[&[2, 3, 6, 6], &[6, 1, 3, 3], &[1, 6]],
        Signed,
        |p| {
            ops::conv(
                &p[0],
                &p[1],
                ops::ConvAttrs {
                    bias: Some(Arg::from(&p[2])),
                    groups: 3,
                    padding: pads(2, 2),
                    dilation: vec![2, 2],
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "conv depthwise (groups 0), stride 2",
        &[&[1, 4, 5, 5], &[4, 1, 3, 3]],
        Signed,
        |p| {
            ops::conv(
                &p[0],
                &p[1],
                ops::ConvAttrs {
                    groups: 0,
                    padding: pads(1, 2),
                    stride: vec![2, 2],
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "max_pool 2×2 stride 2",
        &[&[1, 2, 4, 4]],
        Distinct,
        |p| {
            ops::max_pool(
                &p[0],
                vec![1, 1, 2, 2],
                ops::MaxPoolAttrs {
                    stride: vec![1, 1, 2, 2],
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "max_pool 3×3 stride 2 pad 1 ignore",
        &[&[1, 1, 5, 5]],
        Distinct,
        |p| {
            ops::max_pool(
                &p[0],
                vec![1, 1, 3, 3],
                ops::MaxPoolAttrs {
                    stride: vec![1, 1, 2, 2],
                    padding: pads(1, 4)
                        .into_iter()
                        .enumerate()
                        .map(|(i, x)| if i < 2 { (0, 0) } else { x })
                        .collect(),
                    border: "ignore".into(),
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case(
        "avg_pool 2×2 stride 2",
        &[&[1, 2, 4, 4]],
        Signed,
        |p| {
            ops::avg_pool(
                &p[0],
                vec![1, 1, 2, 2],
                ops::AvgPoolAttrs {
                    stride: vec![1, 1, 2, 2],
                    ..Default::default()
                },
            )
            .unwrap()
        },
    ));
    v.push(case("avg_pool 3×3 pad 1", &[&[1, 1, 4, 4]], Signed, |p| {
        ops::avg_pool(
            &p[0],
            vec![1, 1, 3, 3],
            ops::AvgPoolAttrs {
                padding: vec![(0, 0), (0, 0), (1, 1), (1, 1)],
                ..Default::default()
            },
        )
        .unwrap()
    }));
    v.push(case(
        "batch_normalization (input, offset, scale)",
        &[&[2, 3, 2, 2], &[1, 3], &[1, 3]],
        Signed,
        |p| {
            let g = p[0].graph();
            let mean = g
                .constant(&Tensor::f32(vec![1, 3], vec![0.1, -0.2, 0.3]))
                .unwrap();
            let var = g
                .constant(&Tensor::f32(vec![1, 3], vec![0.5, 1.5, 2.0]))
                .unwrap();
            ops::batch_normalization(&p[0], &mean, &var, &p[1], &p[2], 1e-3).unwrap()
        },
    ));
    v.push(case("softmax + cross-entropy", &[&[2, 4]], Signed, |p| {
        let g = p[0].graph();
        let t = g
            .constant(&Tensor::f32(
                vec![2, 4],
                vec![0., 1., 0., 0., 0., 0., 0., 1.],
            ))
            .unwrap();
        let s = ops::softmax(&p[0], ops::SoftmaxAttrs { axes: vec![1] }).unwrap();
        let l = ops::log(&s).unwrap();
        let tl = ops::mul(&t, &l).unwrap();
        let sum = ops::sum_reduce(&tl, vec![0, 1], ops::SumReduceAttrs::default()).unwrap();
        ops::neg(&sum).unwrap()
    }));
    v
}

/// Values for parameter `k` of a case (`k` shifts the `Distinct` grid so that two
/// parameters never tie either).
fn draw(r: &mut Lcg, d: Draw, shape: &[usize], k: usize) -> Tensor {
    let n = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            let x = r.next();
            match d {
                Draw::Signed => {
                    if x.abs() < 0.1 {
                        x.signum() * 0.1 + x
                    } else {
                        x
                    }
                }
                Draw::Positive => 1.0 + 0.5 * x,
                Draw::Distinct => x,
            }
        })
        .collect::<Vec<f32>>();
    let data = if matches!(d, Draw::Distinct) {
        // Rank the random draws: a shuffled, evenly spaced sequence.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| data[a].total_cmp(&data[b]));
        let mut out = vec![0.0; n];
        for (rank, &i) in order.iter().enumerate() {
            out[i] = (rank as f32 - n as f32 / 2.0) * 0.05 + 0.02 * k as f32;
        }
        out
    } else {
        data
    };
    Tensor::f32(shape.to_vec(), data)
}

/// Largest |analytic − numeric| / max(1, |numeric|) of one case.
fn check(c: &Case, seed: u64) -> Result<f32, String> {
    let g = Graph::new("grad_check");
    let params: Vec<Value> = c
        .shapes
        .iter()
        .enumerate()
        .map(|(i, s)| g.input(&format!("p{i}"), DType::F32, s).unwrap())
        .collect();
    let out = (c.build)(&params);
    let shape: Vec<usize> = out.shape().into_iter().map(|d| d.unwrap()).collect();
    let mut r = Lcg::new(seed);
    let weights = draw(&mut r, Draw::Signed, &shape, 0);
    let w = g.constant(&weights).unwrap();
    let prod = ops::mul(&out, &w).unwrap();
    let all: Vec<i64> = (0..shape.len() as i64).collect();
    let loss = ops::sum_reduce(&prod, all, ops::SumReduceAttrs::default()).unwrap();
    let grads = grad(&loss, &params).map_err(|e| e.to_string())?;
    g.output("loss", &loss).unwrap();
    for (i, d) in grads.iter().enumerate() {
        g.output(&format!("d{i}"), d).unwrap();
    }
    let doc = g.finish().map_err(|e| e.to_string())?;
    let mut model = doc.load().map_err(|e| format!("{e}\n{}", doc.text()))?;
    let inputs: Vec<Tensor> = c
        .shapes
        .iter()
        .enumerate()
        .map(|(k, s)| draw(&mut r, c.draw, s, k))
        .collect();
    let base = model.run(&inputs).map_err(|e| e.to_string())?;
    let loss_at = |model: &mut nnefc::exec::LoadedModel, xs: &[Tensor]| -> f64 {
        f64::from(f32s(&model.run(xs).expect("run")[0])[0])
    };
    let h = 1e-2_f32;
    let mut worst = 0.0_f32;
    for (i, x) in inputs.iter().enumerate() {
        let analytic = f32s(&base[1 + i]);
        for k in 0..f32s(x).len() {
            let mut plus = inputs.clone();
            let mut minus = inputs.clone();
            if let TensorData::F32(d) = &mut plus[i].data {
                d[k] += h;
            }
            if let TensorData::F32(d) = &mut minus[i].data {
                d[k] -= h;
            }
            let numeric = ((loss_at(&mut model, &plus) - loss_at(&mut model, &minus))
                / (2.0 * f64::from(h))) as f32;
            let err = (analytic[k] - numeric).abs() / numeric.abs().max(1.0);
            if err > 2e-2 {
                return Err(format!(
                    "d loss / d p{i}[{k}]: analytic {} vs numeric {numeric}\n{}",
                    analytic[k],
                    doc.text()
                ));
            }
            worst = worst.max(err);
        }
    }
    Ok(worst)
}

#[test]
fn every_gradient_rule_matches_finite_differences() {
    let mut failures = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for (i, c) in cases().iter().enumerate() {
        match check(c, 17 + i as u64) {
            Ok(err) => eprintln!("grad {:<45} worst relative error {err:.2e}", c.name),
            Err(e) => failures.push(format!("{}: {e}", c.name)),
        }
        covered.insert(c.name.split([' ', '+']).next().unwrap_or("").to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let missing: Vec<&&str> = nnefc::graph::grad::RULES
        .iter()
        .filter(|r| !covered.contains(**r))
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a finite-difference case: {missing:?}"
    );
}

#[test]
fn grad_refuses_what_it_cannot_differentiate() {
    let g = Graph::new("g");
    let x = g.input("x", DType::F32, &[1, 4]).unwrap();
    let y = ops::sin(&x).unwrap();
    let l = ops::sum_reduce(&y, vec![0, 1], ops::SumReduceAttrs::default()).unwrap();
    let e = grad(&l, &[x.clone()]).unwrap_err();
    assert!(
        e.message.contains("no gradient for the arguments of `sin`"),
        "{e}"
    );
    assert_eq!(e.location.unwrap().file(), file!());
    let e = grad(&y, &[x]).unwrap_err();
    assert!(e.message.contains("must hold one element"), "{e}");
}

#[path = "../../examples/train.rs"]
mod train_example;

/// The training example with its fixed seed: the loss falls steadily and the classes end up
/// separated.
#[test]
fn training_example_loss_falls() {
    let (losses, accuracy) = train_example::train(150, 7).expect("train");
    let first = losses[0];
    let last = *losses.last().unwrap();
    assert!(last < 0.2 * first, "loss {first} → {last}");
    // Mostly monotone: every 25-step window ends lower than it started.
    for w in losses.chunks(25) {
        assert!(w.last() < w.first(), "{w:?}");
    }
    assert!(accuracy > 0.95, "accuracy {accuracy}");
}

/// `grad` on a model loaded from NNEF (`from_nnef`), not built in Rust: tiny_cnn (three
/// convs, one grouped and one depthwise, leaky_relu, max and avg pool, slice, mean, tile,
/// elu, linear, softmax, log), differentiated w.r.t. its input and checked against central
/// differences at every input element. Gradients w.r.t. weights (the grouped conv's
/// filter among them) are built and compiled too; their rules have their own cases above.
#[test]
fn gradient_of_a_loaded_model_matches_finite_differences() {
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/tiny_cnn");
    let (g, values) = nnefc::graph::from_nnef_with_values(&model.join("model.nnef")).unwrap();
    let x = values["input"].clone();
    let out = values["output"].clone();
    let mut r = Lcg::new(11);
    let weights = draw(&mut r, Draw::Signed, &[1, 10], 0);
    let w = g.constant(&weights).unwrap();
    let prod = ops::mul(&out, &w).unwrap();
    let loss = ops::sum_reduce(&prod, vec![0, 1], ops::SumReduceAttrs::default()).unwrap();
    let grads = grad(
        &loss,
        &[
            x,
            values["variable7"].clone(),
            values["variable5"].clone(),
            values["variable1"].clone(),
        ],
    )
    .unwrap();
    g.output("loss", &loss).unwrap();
    for (i, d) in grads.iter().enumerate() {
        g.output(&format!("d{i}"), d).unwrap();
    }
    let doc = g.finish().unwrap();
    let mut m = doc.load().unwrap();
    let input = nnefc::datfile::read(&model.join("input.dat")).unwrap();
    let base = m.run(&[input.clone()]).unwrap();
    // Outputs: the model's own `output`, then `loss`, `d0`, `d1`, `d2`.
    assert_eq!(base[3].shape, vec![8, 1, 5, 5]);
    assert_eq!(base[4].shape, vec![10, 784]);
    assert_eq!(base[5].shape, vec![16, 4, 3, 3]);
    assert!(f32s(&base[3]).iter().any(|v| *v != 0.0));
    let analytic = f32s(&base[2]).to_vec();
    let h = 1e-2_f32;
    let mut worst = 0.0_f32;
    let mut bad = Vec::new();
    for k in 0..analytic.len() {
        let mut at = |d: f32| {
            let mut t = input.clone();
            if let TensorData::F32(v) = &mut t.data {
                v[k] += d;
            }
            f64::from(f32s(&m.run(&[t]).unwrap()[1])[0])
        };
        let (plus, minus) = (at(h), at(-h));
        let numeric = ((plus - minus) / (2.0 * f64::from(h))) as f32;
        let err = (analytic[k] - numeric).abs() / numeric.abs().max(1.0);
        worst = worst.max(err);
        if err > 2e-2 {
            bad.push((k, analytic[k], numeric));
        }
    }
    eprintln!("tiny_cnn d loss / d input: worst relative error {worst:.2e}");
    assert!(
        bad.is_empty(),
        "{} of {} elements off: {:?}",
        bad.len(),
        analytic.len(),
        &bad[..bad.len().min(8)]
    );
}
