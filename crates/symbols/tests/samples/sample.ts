interface Shape {
  area(): number;
}

abstract class Base {
  abstract name(): string;
}

class Point extends Base implements Shape {
  area(): number {
    return 0;
  }
  name(): string {
    return "point";
  }
}

function make(x: number): Point {
  return new Point();
}

module Geometry {
  export const unit = 1;
}
