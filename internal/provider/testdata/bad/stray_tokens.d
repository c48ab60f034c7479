provider myapp {
	probe start();
	int x;
	probe stop();
};
= 3;
probe orphan(int);
}
