/* nothing here
