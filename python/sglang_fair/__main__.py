from sglang_fair.cli import main

raise SystemExit(main())
