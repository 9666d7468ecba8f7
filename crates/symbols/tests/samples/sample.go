package shapes

const Limit = 3

type Point struct {
	X int
}

type Area interface {
	Area() float64
}

// Area is the area of a point.
func (p Point) Area() float64 {
	return 0
}

func New(x int) Point {
	return Point{X: x}
}
