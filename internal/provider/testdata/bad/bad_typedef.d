typedef unsigned int;
typedef long myint;
typedef int myint;
typedef struct point { int x; } point_t;
typedef int arr[4];

provider myapp {
	probe start(myint x);
};
