namespace geo {

class Point {
public:
    int area() const {
        return 0;
    }
    int perimeter() const;
};

int Point::perimeter() const {
    return 4;
}

struct Size {
    int w;
};

}  // namespace geo

int main() {
    geo::Point p;
    return p.area();
}
