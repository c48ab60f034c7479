provider myapp {
	probe start();
	probe stop();
