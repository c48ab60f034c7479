provider my.app {
	probe start();
};
