class Point {
  constructor(x) {
    this.x = x;
  }

  area() {
    return 0;
  }
}

function make(x) {
  return new Point(x);
}

const double = (v) => v * 2;
