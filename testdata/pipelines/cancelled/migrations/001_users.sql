CREATE TABLE users (id integer PRIMARY KEY, name text NOT NULL);
