provider myapp {
	probe a(t1 x);
	probe b(t2 x);
	probe c(t3 x);
	probe d(t4 x);
	probe e(t5 x);
	probe f(t6 x);
	probe g(t7 x);
	probe h(t8 x);
	probe i(t9 x);
	probe j(t10 x);
	probe k(t11 x);
	probe l(t12 x);
};
