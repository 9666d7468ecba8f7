//! A sample.
pub const LIMIT: usize = 3;

pub struct Point {
    x: i32,
}

pub enum Shape {
    Dot(Point),
}

pub trait Area {
    fn area(&self) -> f64;
}

impl Area for Shape {
    fn area(&self) -> f64 {
        0.0
    }
}

impl<T> Wrapper<T> {
    pub fn new(value: T) -> Self {
        Wrapper(value)
    }
}

mod inner {
    pub fn helper() {}
}

macro_rules! square {
    ($x:expr) => {
        $x * $x
    };
}

fn main() {
    let p = Point { x: 1 };
    helper();
}
