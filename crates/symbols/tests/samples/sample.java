package shapes;

interface Shape {
    double area();
}

public class Point implements Shape {
    private final int x;

    public Point(int x) {
        this.x = x;
    }

    public double area() {
        return 0;
    }
}

enum Color { RED, GREEN }
