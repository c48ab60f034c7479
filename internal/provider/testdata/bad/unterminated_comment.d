provider myapp {
	probe start(); /* fires when the server
	                  starts listening
	probe stop();
};
