provider myapp {
	probe start;
	probe stop(int code;
	probe other(int a int b);
	probe x(int,);
};
