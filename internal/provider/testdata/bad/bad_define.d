#define
#define 3com int
#define MAX(a, b) a
#define int long
#define VERSION 3
#define ID unit64_t

provider myapp {
	probe start(VERSION v, ID id);
};
