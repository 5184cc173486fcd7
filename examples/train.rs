//! Trains a small MLP with nnefc and nothing else: the network, its loss, the gradients and
//! the SGD update are one graph built with `nnefc::graph`, compiled to native code and
//! loaded into this process; the loop feeds each step's updated weights to the next.
//!
//! The task is a disc inside a ring (256 points, generated here with a fixed seed): no
//! linear model separates them. `cargo run --release --example train` prints
//! the loss every 50 steps and the final accuracy. `tests/all/graph_grad.rs` runs
//! [`train`] with a fixed seed and checks that the loss falls. Not a training framework:
//! no batching, no optimizer state beyond plain SGD.

use nnefc::compiler::ir::{DType, Tensor, TensorData};
use nnefc::graph::{Arg, Graph, ops, sgd};

/// Points per class.
const PER_CLASS: usize = 128;
/// Hidden units.
const HIDDEN: usize = 16;
const RATE: f32 = 0.5;

struct Rng(u64);

impl Rng {
    /// Uniform in [-1, 1).
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn values(t: &Tensor) -> &[f32] {
    match &t.data {
        TensorData::F32(v) => v,
        _ => &[],
    }
}

/// The data: inputs `[2·PER_CLASS, 2]` and one-hot targets `[2·PER_CLASS, 2]`; class 0
/// within radius 0.5 of the origin, class 1 on a ring from 0.7 to 1.
fn disc_and_ring(rng: &mut Rng) -> (Tensor, Tensor) {
    let n = 2 * PER_CLASS;
    let (mut x, mut t) = (Vec::with_capacity(2 * n), Vec::with_capacity(2 * n));
    for class in 0..2 {
        for _ in 0..PER_CLASS {
            let angle = std::f32::consts::PI * rng.next();
            let u = 0.5 * (rng.next() + 1.0);
            let r = if class == 0 { 0.5 * u } else { 0.7 + 0.3 * u };
            x.push(r * angle.cos());
            x.push(r * angle.sin());
            t.extend(if class == 0 { [1.0, 0.0] } else { [0.0, 1.0] });
        }
    }
    (Tensor::f32(vec![n, 2], x), Tensor::f32(vec![n, 2], t))
}

/// Builds the training step: inputs `x`, `t` and the four parameters; outputs the loss,
/// the class probabilities and the updated parameters.
fn training_step() -> Result<nnefc::graph::Document, nnefc::graph::Error> {
    let n = 2 * PER_CLASS;
    let g = Graph::new("train_step");
    let x = g.input("x", DType::F32, &[n, 2])?;
    let t = g.input("t", DType::F32, &[n, 2])?;
    let w1 = g.input("w1", DType::F32, &[HIDDEN, 2])?;
    let b1 = g.input("b1", DType::F32, &[1, HIDDEN])?;
    let w2 = g.input("w2", DType::F32, &[2, HIDDEN])?;
    let b2 = g.input("b2", DType::F32, &[1, 2])?;
    let h = ops::linear(
        &x,
        &w1,
        ops::LinearAttrs {
            bias: Some(Arg::from(&b1)),
        },
    )?;
    let h = ops::tanh(&h)?;
    let z = ops::linear(
        &h,
        &w2,
        ops::LinearAttrs {
            bias: Some(Arg::from(&b2)),
        },
    )?;
    let p = ops::softmax(&z, ops::SoftmaxAttrs { axes: vec![1] })?;
    // Mean cross-entropy: −Σ t·log p / n.
    let logp = ops::log(&p)?;
    let tl = ops::mul(&t, &logp)?;
    let sum = ops::sum_reduce(&tl, vec![0, 1], ops::SumReduceAttrs::default())?;
    let loss = ops::div(&sum, -(n as f32))?;
    let params = [w1, b1, w2, b2];
    let updated = sgd(&loss, &params, RATE)?;
    g.output("loss", &loss)?;
    g.output("probabilities", &p)?;
    for (name, u) in ["w1_next", "b1_next", "w2_next", "b2_next"]
        .iter()
        .zip(&updated)
    {
        g.output(name, u)?;
    }
    g.finish()
}

/// Runs `steps` training steps from weights drawn with `seed`; returns the loss before
/// each step and the final accuracy.
pub fn train(steps: usize, seed: u64) -> Result<(Vec<f32>, f32), String> {
    let mut rng = Rng(seed);
    let (x, t) = disc_and_ring(&mut rng);
    let doc = training_step().map_err(|e| e.to_string())?;
    let mut model = doc.load()?;
    let mut init = |shape: &[usize], scale: f32| {
        let n = shape.iter().product();
        Tensor::f32(shape.to_vec(), (0..n).map(|_| scale * rng.next()).collect())
    };
    let mut params = vec![
        init(&[HIDDEN, 2], 2.0),
        init(&[1, HIDDEN], 1.0),
        init(&[2, HIDDEN], 0.5),
        init(&[1, 2], 0.0),
    ];
    let mut losses = Vec::with_capacity(steps);
    let mut accuracy = 0.0;
    for _ in 0..steps {
        let mut inputs = vec![x.clone(), t.clone()];
        inputs.extend(params.iter().cloned());
        let mut out = model.run(&inputs).map_err(|e| e.to_string())?;
        losses.push(values(&out[0])[0]);
        let (p, tv) = (values(&out[1]), values(&t));
        let correct = (0..p.len() / 2)
            .filter(|&i| (p[2 * i] > p[2 * i + 1]) == (tv[2 * i] > 0.5))
            .count();
        accuracy = correct as f32 / (p.len() / 2) as f32;
        params = out.split_off(2);
    }
    Ok((losses, accuracy))
}

#[allow(dead_code)]
fn main() {
    match train(500, 7) {
        Ok((losses, accuracy)) => {
            for (i, l) in losses.iter().enumerate().step_by(50) {
                println!("step {i:4}  loss {l:.4}");
            }
            println!(
                "final loss {:.4}, accuracy {:.1} %",
                losses.last().copied().unwrap_or(f32::NAN),
                100.0 * accuracy
            );
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
