provider myapp
	probe start();
};
