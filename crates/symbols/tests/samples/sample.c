#include <stdio.h>

struct point {
    int x;
};

typedef struct point point_t;

int area(struct point *p);

int area(struct point *p)
{
    return 0;
}

static char *name(void)
{
    return "point";
}

enum color { RED, GREEN };
