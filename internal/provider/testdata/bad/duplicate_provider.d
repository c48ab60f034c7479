provider myapp {
	probe start();
};

provider myapp {
	probe stop();
};
