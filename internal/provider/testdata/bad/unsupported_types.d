provider myapp {
	probe a(double ratio);
	probe b(void v);
	probe c(enum color c);
	probe d(int, void);
};
