provider myapp {
	probe start(int port)
	probe stop();
};
